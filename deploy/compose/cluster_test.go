package compose

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"
)

// topology is what the test reads from docker-compose.cluster.yml: the
// Redis services and their ports, and where each sluice service is
// published on the host.
type topology struct {
	redisPorts map[string]string // service → --port
	sluice     map[string]published
}

// published is a sluice service's host addresses.
type published struct{ resp, admin string }

func readTopology(t *testing.T) topology {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, composeFile))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Services map[string]struct {
			Command []string `yaml:"command"`
			Ports   []string `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	top := topology{redisPorts: map[string]string{}, sluice: map[string]published{}}
	for name, s := range f.Services {
		switch {
		case len(s.Command) > 0 && s.Command[0] == "redis-server":
			top.redisPorts[name] = flagValue(s.Command, "--port")
		case len(s.Command) > 0 && s.Command[0] == "serve":
			var p published
			_, listen, _ := net.SplitHostPort(flagValue(s.Command, "--listen"))
			_, admin, _ := net.SplitHostPort(flagValue(s.Command, "--admin"))
			for _, spec := range s.Ports { // 127.0.0.1:HOST:CONTAINER
				parts := strings.Split(spec, ":")
				if len(parts) != 3 {
					t.Fatalf("%s: service %s: port %q is not host-ip:host-port:container-port", composeFile, name, spec)
				}
				addr := net.JoinHostPort(parts[0], parts[1])
				switch parts[2] {
				case listen:
					p.resp = addr
				case admin:
					p.admin = addr
				}
			}
			if p.resp == "" || p.admin == "" {
				t.Fatalf("%s: service %s publishes %q, not its --listen %s and --admin %s", composeFile, name, s.Ports, listen, admin)
			}
			top.sluice[name] = p
		}
	}
	if len(top.redisPorts) != 6 || len(top.sluice) != 2 {
		t.Fatalf("%s: %d Redis and %d sluice services, want 6 and 2", composeFile, len(top.redisPorts), len(top.sluice))
	}
	return top
}

func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// clusterNode is one line of CLUSTER NODES.
type clusterNode struct {
	id, host, flags, master string // host: the announced hostname (the service)
	slots                   [][2]int
}

func (n clusterNode) primary() bool { return strings.Contains(n.flags, "master") }
func (n clusterNode) failed() bool  { return strings.Contains(n.flags, "fail") }

func (n clusterNode) owns(slot int) bool {
	for _, r := range n.slots {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

func parseNodes(out string) ([]clusterNode, error) {
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("CLUSTER NODES line %q", line)
		}
		n := clusterNode{id: f[0], flags: f[2], master: f[3]}
		if _, host, ok := strings.Cut(f[1], ","); ok {
			n.host = host
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") { // a slot being migrated
				continue
			}
			lo, hi, _ := strings.Cut(r, "-")
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if hi == "" {
				b, err2 = a, nil
			}
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("CLUSTER NODES slots %q in %q", r, line)
			}
			n.slots = append(n.slots, [2]int{a, b})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// formed says why the cluster is not yet 3 primaries with one replica
// each, all 16384 slots served (nil when it is).
func formed(info, nodesOut string) error {
	for _, want := range []string{"cluster_state:ok", "cluster_slots_assigned:16384", "cluster_slots_ok:16384", "cluster_known_nodes:6", "cluster_size:3"} {
		if !strings.Contains(info, want) {
			return fmt.Errorf("CLUSTER INFO has no %s:\n%s", want, info)
		}
	}
	nodes, err := parseNodes(nodesOut)
	if err != nil {
		return err
	}
	replicas := map[string]int{}
	primaries := 0
	for _, n := range nodes {
		if n.failed() {
			return fmt.Errorf("node %s is %s", n.host, n.flags)
		}
		if n.primary() {
			primaries++
		} else {
			replicas[n.master]++
		}
	}
	if primaries != 3 {
		return fmt.Errorf("%d primaries, want 3:\n%s", primaries, nodesOut)
	}
	for _, n := range nodes {
		if n.primary() && replicas[n.id] != 1 {
			return fmt.Errorf("primary %s has %d replicas, want 1:\n%s", n.host, replicas[n.id], nodesOut)
		}
	}
	return nil
}

// poll calls f until it returns nil, or gives up after within (a guard
// against waiting forever, not a measure) and returns its last error.
func poll(within time.Duration, f func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reply is one RL.TAKE or RL.PEEK reply.
type reply struct {
	Allowed                          bool
	Limit, Remaining, Retry, ResetMs int64
	DecidedBy                        string
	took                             time.Duration
}

func (r reply) String() string {
	return fmt.Sprintf("allowed=%v limit=%d remaining=%d decided_by=%s", r.Allowed, r.Limit, r.Remaining, r.DecidedBy)
}

func call(c *redis.Client, cmd, key string) (reply, error) {
	start := time.Now()
	v, err := c.Do(context.Background(), cmd, key, 1).Slice()
	if err != nil {
		return reply{}, fmt.Errorf("%s %s: %w", cmd, key, err)
	}
	if len(v) != 6 {
		return reply{}, fmt.Errorf("%s %s: %d elements, want 6: %v", cmd, key, len(v), v)
	}
	var n [5]int64
	for i := range n {
		x, ok := v[i].(int64)
		if !ok {
			return reply{}, fmt.Errorf("%s %s: element %d is %T, want integer", cmd, key, i+1, v[i])
		}
		n[i] = x
	}
	by, ok := v[5].(string)
	if !ok {
		return reply{}, fmt.Errorf("%s %s: element 6 is %T, want bulk string", cmd, key, v[5])
	}
	return reply{Allowed: n[0] == 1, Limit: n[1], Remaining: n[2], Retry: n[3], ResetMs: n[4], DecidedBy: by, took: time.Since(start)}, nil
}

// sluiceClient is a RESP client of one sluice container. MaxRetries -1:
// a take is never sent twice. The read timeout only tells a hung request
// from an answer.
func sluiceClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 32, MaxRetries: -1, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// takes sends n RL.TAKEs of key through c, all at once, and returns the
// replies.
func takes(c *redis.Client, key string, n int) ([]reply, error) {
	out := make([]reply, n)
	errs := make([]error, n)
	done := make(chan int)
	for i := range n {
		go func() {
			out[i], errs[i] = call(c, "RL.TAKE", key)
			done <- i
		}()
	}
	for range n {
		<-done
	}
	for _, err := range errs {
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// inTurn sends n RL.TAKEs of key through c, one after the other.
func inTurn(c *redis.Client, key string, n int) ([]reply, error) {
	var out []reply
	for range n {
		r, err := call(c, "RL.TAKE", key)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// admitted counts the allowed replies.
func admitted(rs []reply) int {
	n := 0
	for _, r := range rs {
		if r.Allowed {
			n++
		}
	}
	return n
}

// decidedBy counts the replies by decided_by, as "store=3 fallback-open=2".
func decidedBy(rs []reply) string {
	m := map[string]int{}
	for _, r := range rs {
		m[r.DecidedBy]++
	}
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}

// remainders returns the remaining counts of the admitted replies, sorted.
func remainders(rs []reply) []int64 {
	var r []int64
	for _, x := range rs {
		if x.Allowed {
			r = append(r, x.Remaining)
		}
	}
	slices.Sort(r)
	return r
}

// countdown is 0, 1, … n-1: the remaining counts of n takes that a store
// decided one after the other.
func countdown(n int) []int64 {
	r := make([]int64, n)
	for i := range r {
		r[i] = int64(i)
	}
	return r
}
