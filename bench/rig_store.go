package bench

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

// HotKey is the user key of the hot scenario; its Redis key is
// cluster.Key(HotKey).
const HotKey = "hot"

// HotLeaseKey is the user key of the hot-lease scenario on the sluice side.
// Its hash tag is HotKey's, so its Redis key lives on the same slot, and
// the same primary, as the direct side's.
const HotLeaseKey = "{hot}:lease"

// store is the Redis Cluster both sides use, seen from the harness.
type store struct {
	cc        *redis.ClusterClient
	seeds     []string
	sha       string
	bucket    limit.Bucket
	primaries []string // addresses, sorted
	pids      []int    // every node's redis-server pid; nil when not local
	primPids  []int    // the primaries' among them
	version   string   // redis_version of the seed
}

func openStore(ctx context.Context, seeds []string, bucket limit.Bucket) (*store, error) {
	sum := sha1.Sum([]byte(lua.TokenBucket.Src))
	s := &store{
		cc:     redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds, MaxRetries: -1, DisableIdentity: true}),
		seeds:  seeds,
		sha:    hex.EncodeToString(sum[:]),
		bucket: bucket,
	}
	if err := s.init(ctx); err != nil {
		_ = s.cc.Close()
		return nil, err
	}
	return s, nil
}

func (s *store) close() { _ = s.cc.Close() }

// init loads the script on every primary and finds the primaries and the
// pids of every node.
func (s *store) init(ctx context.Context) error {
	var mu sync.Mutex
	err := s.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		sha, err := c.ScriptLoad(ctx, lua.TokenBucket.Src).Result()
		if err != nil {
			return fmt.Errorf("bench: SCRIPT LOAD on %s: %w", c.Options().Addr, err)
		}
		if sha != s.sha {
			return fmt.Errorf("bench: SCRIPT LOAD on %s returned %s, want %s", c.Options().Addr, sha, s.sha)
		}
		mu.Lock()
		s.primaries = append(s.primaries, c.Options().Addr)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return fmt.Errorf("bench: cluster %v: %w", s.seeds, err)
	}
	slices.Sort(s.primaries)
	info, err := s.cc.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("bench: INFO server: %w", err)
	}
	s.version = infoFields(info)["redis_version"]
	s.pids, s.primPids, err = s.nodePids(ctx)
	return err
}

// nodePids returns the redis-server pid of every node, primaries and
// replicas as CLUSTER NODES lists them, and of the primaries alone, from
// each node's INFO server, when every node is a process on this machine;
// nil otherwise (the CPU columns then read n/a).
func (s *store) nodePids(ctx context.Context) (pids, primaries []int, err error) {
	text, err := s.cc.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("bench: CLUSTER NODES: %w", err)
	}
	addrs, err := nodeAddrs(text)
	if err != nil {
		return nil, nil, err
	}
	for _, addr := range addrs {
		if !isLoopback(addr) {
			return nil, nil, nil
		}
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true})
		info, err := c.Info(ctx, "server").Result()
		_ = c.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("bench: INFO server on %s: %w", addr, err)
		}
		pid, err := strconv.Atoi(infoFields(info)["process_id"])
		if err != nil || !strings.HasPrefix(procName(pid), "redis-server") {
			return nil, nil, nil
		}
		pids = append(pids, pid)
		if slices.Contains(s.primaries, addr) {
			primaries = append(primaries, pid)
		}
	}
	slices.Sort(pids)
	slices.Sort(primaries)
	return pids, primaries, nil
}

// nodeAddrs reads the host:port of every node, failed ones excepted, from
// CLUSTER NODES text: `<id> <ip:port@cport[,hostname]> <flags> …`.
func nodeAddrs(text string) ([]string, error) {
	var out []string
	for line := range strings.SplitSeq(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fmt.Errorf("bench: CLUSTER NODES line %q", line)
		}
		if strings.Contains(f[2], "fail") || strings.Contains(f[2], "noaddr") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		out = append(out, addr)
	}
	return out, nil
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// args are the script's ARGV for one take of cost 1.
func (s *store) args() []string { return bucketArgs(s.bucket) }

// bucketArgs are the script's ARGV for one take of cost 1 from b.
func bucketArgs(b limit.Bucket) []string {
	return []string{strconv.FormatInt(b.Capacity, 10), strconv.FormatInt(b.Refill, 10), strconv.FormatInt(b.Scale, 10), "1", "0"}
}

// directUniform is redis-benchmark sending the store's script by EVALSHA
// straight at the shards at pipeline 1, uniform keys over keyspace: --cluster
// replaces {tag} with a hash tag of a slot that the client's node owns, so
// each client's keys stay on its node.
func (s *store) directUniform(keyspace int) (invocation, error) {
	seedHost, seedPort, err := splitAddr(s.seeds[0])
	if err != nil {
		return invocation{}, err
	}
	return invocation{Cluster: true, Host: seedHost, Port: seedPort, Pipeline: 1, Keyspace: keyspace,
		Command: append([]string{"EVALSHA", s.sha, "1", cluster.Prefix + "{tag}:__rand_int__"}, s.args()...)}, nil
}

// sanity runs the script once through the cluster client and checks the
// reply: a 6-element array of integers, admitted.
func (s *store) sanity(ctx context.Context, key string) error {
	args := make([]any, 0, 5)
	for _, a := range s.args() {
		args = append(args, a)
	}
	v, err := s.cc.EvalSha(ctx, s.sha, []string{key}, args...).Slice()
	if err != nil {
		return fmt.Errorf("bench: EVALSHA %s on %s: %w", s.sha, key, err)
	}
	if len(v) != lua.ReplyInts {
		return fmt.Errorf("bench: EVALSHA on %s replied %d elements, want %d: %v", key, len(v), lua.ReplyInts, v)
	}
	for i, x := range v {
		if _, ok := x.(int64); !ok {
			return fmt.Errorf("bench: EVALSHA on %s: element %d is %T, want an integer: %v", key, i+1, x, v)
		}
	}
	if v[0] != int64(1) {
		return fmt.Errorf("bench: EVALSHA on %s rejected with the bench policy: %v", key, v)
	}
	return nil
}

// owner is the address of the primary that owns a Redis key.
func (s *store) owner(ctx context.Context, key string) (string, error) {
	c, err := s.cc.MasterForKey(ctx, key)
	if err != nil {
		return "", fmt.Errorf("bench: owner of %s: %w", key, err)
	}
	return c.Options().Addr, nil
}

// nodeStats are the counters of one primary that a run checks.
type nodeStats struct {
	scriptCalls int64 // EVAL and EVALSHA calls, failed ones included
	failed      int64 // failed and rejected script calls
	errors      int64 // total_error_replies
}

// stats reads the counters of every primary, by address.
func (s *store) stats(ctx context.Context) (map[string]nodeStats, error) {
	var mu sync.Mutex
	out := map[string]nodeStats{}
	err := s.cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		text, err := c.Info(ctx, "commandstats", "stats").Result()
		if err != nil {
			return fmt.Errorf("bench: INFO on %s: %w", c.Options().Addr, err)
		}
		f := infoFields(text)
		var st nodeStats
		for _, name := range []string{"cmdstat_evalsha", "cmdstat_eval", "cmdstat_evalsha_ro", "cmdstat_eval_ro", "cmdstat_fcall", "cmdstat_fcall_ro"} {
			cs := commandStat(f[name])
			st.scriptCalls += cs["calls"]
			st.failed += cs["failed_calls"] + cs["rejected_calls"]
		}
		st.errors, _ = strconv.ParseInt(f["total_error_replies"], 10, 64)
		mu.Lock()
		out[c.Options().Addr] = st
		mu.Unlock()
		return nil
	})
	return out, err
}

// infoFields reads the key:value lines of INFO text.
func infoFields(text string) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = v
		}
	}
	return out
}

// commandStat reads "calls=3,usec=10,usec_per_call=3.33,…"; only the
// integer fields.
func commandStat(s string) map[string]int64 {
	out := map[string]int64{}
	for kv := range strings.SplitSeq(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				out[k] = n
			}
		}
	}
	return out
}

// redisKey is the Redis key sluice uses for a user key.
func redisKey(user string) string { return cluster.Key(user) }

// splitAddr splits host:port for redis-benchmark's -h and -p.
func splitAddr(addr string) (string, string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("bench: address %q: %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return host, port, nil
}
