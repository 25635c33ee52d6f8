package bench

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of SoakConfig.
const (
	DefaultSoakDuration = 3 * time.Minute
	DefaultSoakSample   = 10 * time.Second
	DefaultSoakFault    = 20 * time.Second
	DefaultSoakWorkers  = 16
)

// SoakConfig configures Soak. Zero values mean the defaults in brackets.
type SoakConfig struct {
	Binary   string        // the sluice binary (os.Executable())
	Duration time.Duration // total run [3m]
	Sample   time.Duration // between samples [10s]
	Fault    time.Duration // between faults [20s]
	Workers  int           // client goroutines [16]
}

// SoakSample is one look at the sluice process.
type SoakSample struct {
	At         time.Duration
	Decisions  int64
	Errors     int64
	Goroutines int
	RSSKiB     int64
	FDs        int
	Fault      string // the fault injected since the last sample
}

// SoakReport is the whole soak.
type SoakReport struct {
	Samples []SoakSample
	Faults  []string
}

// soakPolicy mixes every failure policy and a hot leased key.
const soakPolicy = `timeout: 50ms
policies:
  - name: hot
    match: "hot:*"
    limit: 1000
    rate: 1000
    period: 1s
    on_store_error: local
    hot: {mode: lease, threshold: 500}
  - name: open
    match: "open:*"
    limit: 100
    rate: 100
    period: 1s
    on_store_error: open
  - name: closed
    match: "closed:*"
    limit: 100
    rate: 100
    period: 1s
    on_store_error: closed
  - name: local
    match: "*"
    limit: 50
    rate: 10
    period: 1s
    on_store_error: local
`

// Soak runs mixed keys under load for cfg.Duration against a fresh cluster
// while it injects faults in turn (SCRIPT FLUSH everywhere, a primary
// paused for a second, a flood of 500 connects and disconnects), and samples
// the sluice process's goroutines, RSS and open file descriptors, which
// must end where they started once the load is gone.
func Soak(ctx context.Context, cfg SoakConfig, progress io.Writer) (*SoakReport, error) {
	if cfg.Duration <= 0 {
		cfg.Duration = DefaultSoakDuration
	}
	if cfg.Sample <= 0 {
		cfg.Sample = DefaultSoakSample
	}
	if cfg.Fault <= 0 {
		cfg.Fault = DefaultSoakFault
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultSoakWorkers
	}
	if progress == nil {
		progress = io.Discard
	}
	rig, err := newRig(ctx, rigSpec{name: "lab soak", binary: cfg.Binary, nodeTimeout: 30 * time.Second, policy: soakPolicy}, progress)
	if err != nil {
		return nil, err
	}
	defer rig.close()
	clients, err := rig.startSluice(ctx, 1, rig.seeds, rig.policy, cfg.Workers)
	if err != nil {
		return nil, err
	}
	ch, rdb := rig.children[0], clients[0]

	var decisions, errs atomic.Int64
	var firstErr atomic.Value
	lctx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	prefixes := []string{"hot:1", "open:", "closed:", "user:"}
	for w := range cfg.Workers {
		wg.Go(func() {
			for i := 0; lctx.Err() == nil; i++ {
				key := prefixes[(w+i)%len(prefixes)]
				if key != "hot:1" {
					key += strconv.Itoa((i * 7919) % 100_000)
				}
				err := rdb.Do(lctx, "RL.TAKE", key, 1).Err()
				switch {
				case err == nil:
					decisions.Add(1)
				case lctx.Err() != nil:
				default:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}

	rep := &SoakReport{}
	start := time.Now()
	sample := func(fault string) {
		s := SoakSample{At: time.Since(start).Round(time.Second), Decisions: decisions.Load(), Errors: errs.Load(), Fault: fault}
		s.Goroutines = infoInt(ctx, rdb, "goroutines")
		s.RSSKiB, s.FDs = procUsage(ch.pid())
		rep.Samples = append(rep.Samples, s)
		fmt.Fprintf(progress, "soak: %v decisions=%d errors=%d goroutines=%d rss=%d KiB fds=%d %s\n",
			s.At, s.Decisions, s.Errors, s.Goroutines, s.RSSKiB, s.FDs, fault)
	}
	faults := []func() string{
		func() string {
			if err := rig.rc.ScriptFlushAll(ctx); err != nil {
				return "script flush failed: " + err.Error()
			}
			return "SCRIPT FLUSH on every node"
		},
		func() string {
			n, err := rig.rc.PrimaryForKey(ctx, "sluice:{hot:1}")
			if err != nil {
				return "pause failed: " + err.Error()
			}
			_ = n.Pause()
			time.Sleep(time.Second) // the fault itself: a one-second partition
			_ = n.Resume()
			return "primary " + n.Addr + " paused 1s"
		},
		func() string {
			for range 500 {
				cl := redis.NewClient(&redis.Options{Addr: ch.addr, MaxRetries: -1})
				_ = cl.Ping(ctx).Err()
				_ = cl.Close()
			}
			return "500 connects and disconnects"
		},
	}
	sample("start")
	tick := time.NewTicker(cfg.Sample)
	defer tick.Stop()
	nextFault, fi := time.Now().Add(cfg.Fault), 0
	pending := ""
	for lctx.Err() == nil {
		select {
		case <-tick.C:
			sample(pending)
			pending = ""
		case <-lctx.Done():
		}
		if time.Now().After(nextFault) && lctx.Err() == nil {
			f := faults[fi%len(faults)]()
			rep.Faults = append(rep.Faults, f)
			pending = strings.TrimSpace(pending + " " + f)
			fi++
			nextFault = time.Now().Add(cfg.Fault)
		}
	}
	wg.Wait()
	// The load is gone: wait for idle connections to be closed by the
	// client pool, then take the final sample.
	_ = rdb.Close()
	rdb = redis.NewClient(&redis.Options{Addr: ch.addr, PoolSize: 1, MaxRetries: -1})
	defer rdb.Close()
	_ = poll(ctx, 100*time.Millisecond, 10*time.Second, func() (bool, error) {
		return infoInt(ctx, rdb, "connected_clients") <= 1, nil
	})
	sample("load stopped")
	if e, ok := firstErr.Load().(string); ok {
		rep.Faults = append(rep.Faults, "first error reply: "+e)
	}
	return rep, nil
}

var infoLineRE = regexp.MustCompile(`(?m)^([a-z_]+):(-?\d+)\r?$`)

// infoInt reads one integer field of INFO.
func infoInt(ctx context.Context, rdb *redis.Client, field string) int {
	text, err := rdb.Info(ctx).Result()
	if err != nil {
		return -1
	}
	for _, m := range infoLineRE.FindAllStringSubmatch(text, -1) {
		if m[1] == field {
			n, _ := strconv.Atoi(m[2])
			return n
		}
	}
	return -1
}

// procUsage reads a process's resident set and open descriptors.
func procUsage(pid int) (rssKiB int64, fds int) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
				rssKiB, _ = strconv.ParseInt(f[1], 10, 64)
			}
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		fds = len(ents)
	}
	return rssKiB, fds
}

// Markdown renders the samples as a table.
func (r *SoakReport) Markdown() string {
	var b strings.Builder
	b.WriteString("| t | decisions | error replies | goroutines | RSS MiB | open fds | fault since last sample |\n|--:|--:|--:|--:|--:|--:|---|\n")
	for _, s := range r.Samples {
		fmt.Fprintf(&b, "| %v | %d | %d | %d | %.1f | %d | %s |\n", s.At, s.Decisions, s.Errors, s.Goroutines, float64(s.RSSKiB)/1024, s.FDs, s.Fault)
	}
	return b.String()
}

// labSoak is `sluice lab soak`.
func labSoak() Lab {
	return Lab{Name: "soak", About: "minutes of mixed load and faults; sluice's goroutines, RSS and open files",
		Usage: `Mixed keys (a hot leased key and keys of every on_store_error) under load
for --duration against a local 3+3 Redis Cluster, while faults are injected
in turn every --fault: SCRIPT FLUSH on every node, a primary paused for a
second, a flood of 500 connects and disconnects. Samples sluice's
goroutines, RSS and open file descriptors every --sample, which must end
where they started once the load is gone, and prints them as a table.
`, Flags: func(fs *flag.FlagSet) (LabFunc, error) {
			var cfg SoakConfig
			fs.DurationVar(&cfg.Duration, "duration", DefaultSoakDuration, "how long the load runs")
			fs.DurationVar(&cfg.Sample, "sample", DefaultSoakSample, "between samples")
			fs.DurationVar(&cfg.Fault, "fault", DefaultSoakFault, "between faults")
			fs.IntVar(&cfg.Workers, "workers", DefaultSoakWorkers, "client goroutines")
			return func(ctx context.Context, progress io.Writer) (Markdowner, error) {
				rep, err := Soak(ctx, cfg, progress)
				if err != nil {
					return nil, err
				}
				return rep, nil
			}, nil
		}}
}
