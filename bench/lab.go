package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/policy"
)

// The bucket of the seed lab's experiments: capacity 100, refill 50/s.
const (
	DefaultLabLimit = 100
	DefaultLabRate  = 50 // per second
)

// labBudget is what one bucket of limit tokens refilled at rate per second
// admits in elapsed when it starts full: limit + rate × elapsed.
func labBudget(limit, rate int64, elapsed time.Duration) float64 {
	return float64(limit) + float64(rate)*elapsed.Seconds()
}

// labRig is what one `sluice lab` experiment runs on: the sluice binary, a
// temporary folder for policy files, the cluster (its own or the user's)
// and the sluice processes it started, stopped by pid in close.
type labRig struct {
	name     string
	bin      string
	dir      string
	seeds    []string
	rc       *localredis.Cluster // nil when the cluster was given
	progress io.Writer
	children []*child
	clients  []*redis.Client
}

// newLabRig finds the binary ("" is this executable), makes the folder and,
// when seeds is empty, starts a 3+3 cluster with cluster-node-timeout
// nodeTimeout (0: localredis.s default). The caller must call close.
func newLabRig(ctx context.Context, name, bin string, seeds []string, nodeTimeout time.Duration, progress io.Writer) (*labRig, error) {
	if progress == nil {
		progress = io.Discard
	}
	r := &labRig{name: name, bin: bin, seeds: seeds, progress: progress}
	if r.bin == "" {
		var err error
		if r.bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("lab %s: finding the sluice binary: %w", name, err)
		}
	}
	dir, err := os.MkdirTemp("", "sluice-lab-"+name+"-")
	if err != nil {
		return nil, fmt.Errorf("lab %s: %w", name, err)
	}
	r.dir = dir
	if len(seeds) == 0 {
		r.logf("starting a Redis Cluster (3 primaries, 3 replicas, cluster-node-timeout %v)", nodeTimeout)
		rc, err := localredis.Start(ctx, localredis.Config{NodeTimeout: nodeTimeout, Log: linePrefix{progress, "lab " + name + ": "}})
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		r.rc = rc
		r.seeds = rc.Addrs()
	}
	return r, nil
}

func (r *labRig) logf(format string, args ...any) {
	fmt.Fprintf(r.progress, "lab "+r.name+": "+format+"\n", args...)
}

// close stops the sluice processes and the cluster this rig started and
// removes its folder.
func (r *labRig) close() {
	r.stopSluice()
	if r.rc != nil {
		if err := r.rc.Stop(); err != nil {
			r.logf("stopping the cluster: %v", err)
		}
	}
	_ = os.RemoveAll(r.dir)
}

// stopSluice stops every sluice process started so far, each by its pid.
func (r *labRig) stopSluice() {
	for _, c := range r.clients {
		_ = c.Close()
	}
	r.clients = nil
	var pids []int
	for _, ch := range r.children {
		ch.stop()
		pids = append(pids, ch.pid())
	}
	if len(pids) > 0 {
		r.logf("sluice pids %v stopped", pids)
	}
	r.children = nil
}

// writePolicy writes a policy file named name into the folder, after
// checking that sluice will accept it, and returns its path.
func (r *labRig) writePolicy(name, yaml string) (string, error) {
	if _, err := policy.Parse([]byte(yaml), name); err != nil {
		return "", fmt.Errorf("lab %s: the policy: %w", r.name, err)
	}
	path := filepath.Join(r.dir, name)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		return "", fmt.Errorf("lab %s: %w", r.name, err)
	}
	return path, nil
}

// startSluice starts n `sluice serve` processes with the policy file at
// config, in front of seeds (nil: embedded mode, each process its own
// in-process store), and returns one client for each with a pool of
// workers connections.
func (r *labRig) startSluice(ctx context.Context, n int, seeds []string, config string, workers int) ([]*redis.Client, error) {
	var out []*redis.Client
	var pids []int
	for range n {
		ch, err := startChild(ctx, r.bin, seeds, config)
		if err != nil {
			return nil, err
		}
		r.children = append(r.children, ch)
		pids = append(pids, ch.pid())
		c := redis.NewClient(&redis.Options{
			Addr: ch.addr, PoolSize: workers + 1, MinIdleConns: workers,
			MaxRetries: -1, DisableIdentity: true, Protocol: 2,
		})
		r.clients = append(r.clients, c)
		out = append(out, c)
	}
	store := "embedded"
	if len(seeds) > 0 {
		store = "cluster " + strings.Join(seeds, ",")
	}
	r.logf("started %d × %s serve (%s) --config %s: pids %v", n, r.bin, store, config, pids)
	return out, nil
}

// sluiceVersion asks a sluice process for its version; "unknown" if it
// does not say.
func sluiceVersion(ctx context.Context, c *redis.Client) string {
	if info, err := c.Do(ctx, "INFO", "server").Text(); err == nil {
		if v := infoFields(info)["sluice_version"]; v != "" {
			return v
		}
	}
	return "unknown"
}

// redisVersion asks the cluster for redis_version; "unknown" if it does
// not answer.
func redisVersion(ctx context.Context, seeds []string) string {
	if len(seeds) == 0 {
		return "none"
	}
	c := redis.NewClient(&redis.Options{Addr: seeds[0], MaxRetries: -1, DisableIdentity: true})
	defer c.Close()
	if info, err := c.Info(ctx, "server").Result(); err == nil {
		if v := infoFields(info)["redis_version"]; v != "" {
			return v
		}
	}
	return "unknown"
}

// takeOnce sends one RL.TAKE key 1 and returns the reply.
func takeOnce(ctx context.Context, c *redis.Client, key string) ([]any, error) {
	v, err := c.Do(ctx, "RL.TAKE", key, 1).Slice()
	if err == nil {
		err = checkTake(v)
	}
	if err != nil {
		return nil, fmt.Errorf("RL.TAKE %s: %w", key, err)
	}
	return v, nil
}

// mustStore takes one token of key through c and fails unless the store
// decided it: the experiment starts from strict decisions.
func mustStore(ctx context.Context, c *redis.Client, key string) error {
	v, err := takeOnce(ctx, c, key)
	if err != nil {
		return err
	}
	if v[5] != limit.ByStore {
		return fmt.Errorf("RL.TAKE %s = %v before the fault: want decided_by %s", key, v, limit.ByStore)
	}
	return nil
}

// waitStore sends RL.TAKE key through c every 5 ms until the store decides
// it, and returns when that reply came. An error reply or within passing
// ends it with an error.
func waitStore(ctx context.Context, c *redis.Client, key string, within time.Duration) (time.Time, error) {
	deadline := time.Now().Add(within)
	for {
		v, err := takeOnce(ctx, c, key)
		if err != nil {
			return time.Time{}, err
		}
		if v[5] == limit.ByStore {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%s: no strict decision within %v: %v", key, within, v)
		}
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// maxDuration is the largest of d, 0 when empty.
func maxDuration(d []time.Duration) time.Duration {
	var m time.Duration
	for _, x := range d {
		m = max(m, x)
	}
	return m
}

// ms renders milliseconds with the precision the value needs: 0.00021,
// 0.113, 12.5.
func ms(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v < 0.01:
		return fixed(v, 5)
	case v < 10:
		return fixed(v, 3)
	}
	return fixed(v, 1)
}

// cell escapes a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
