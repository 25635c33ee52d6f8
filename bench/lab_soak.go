package bench

import (
	"context"
	"fmt"
	"io"
	"os"
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
	Binary   string        // the sluice binary; "" means sluiceBinary's
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
	orDefault(&cfg.Duration, DefaultSoakDuration)
	orDefault(&cfg.Sample, DefaultSoakSample)
	orDefault(&cfg.Fault, DefaultSoakFault)
	orDefault(&cfg.Workers, DefaultSoakWorkers)
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
	s := &soak{rig: rig, ch: rig.children[0], rdb: clients[0], progress: progress, rep: &SoakReport{}}
	lctx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	wait := s.load(lctx, cfg.Workers)
	s.start = time.Now()
	s.sample(ctx, "start")
	s.faultsUntil(ctx, lctx, cfg)
	wait()
	// The load is gone: wait for idle connections to be closed by the
	// client pool, then take the final sample.
	_ = s.rdb.Close()
	s.rdb = redis.NewClient(&redis.Options{Addr: s.ch.addr, PoolSize: 1, MaxRetries: -1})
	defer s.rdb.Close()
	_ = poll(ctx, 100*time.Millisecond, 10*time.Second, func() (bool, error) {
		return infoInt(ctx, s.rdb, "connected_clients") <= 1, nil
	})
	s.sample(ctx, "load stopped")
	if e, ok := s.firstErr.Load().(string); ok {
		s.rep.Faults = append(s.rep.Faults, "first error reply: "+e)
	}
	return s.rep, nil
}

// soak is one Soak run: the sluice child, a client of it, the load's
// counters and the report.
type soak struct {
	rig       *rig
	ch        *child
	rdb       *redis.Client
	progress  io.Writer
	rep       *SoakReport
	start     time.Time
	decisions atomic.Int64
	errs      atomic.Int64
	firstErr  atomic.Value // the first error reply's text
}

// load starts workers sending RL.TAKE of the mixed keys until lctx ends;
// wait returns when they have stopped.
func (s *soak) load(lctx context.Context, workers int) (wait func()) {
	var wg sync.WaitGroup
	prefixes := []string{"hot:1", "open:", "closed:", "user:"}
	for w := range workers {
		wg.Go(func() {
			for i := 0; lctx.Err() == nil; i++ {
				key := prefixes[(w+i)%len(prefixes)]
				if key != "hot:1" {
					key += strconv.Itoa((i * 7919) % 100_000)
				}
				err := s.rdb.Do(lctx, "RL.TAKE", key, 1).Err()
				switch {
				case err == nil:
					s.decisions.Add(1)
				case lctx.Err() != nil:
				default:
					s.errs.Add(1)
					s.firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	return wg.Wait
}

// sample takes one look at the sluice process; fault is what was injected
// since the last.
func (s *soak) sample(ctx context.Context, fault string) {
	smp := SoakSample{At: time.Since(s.start).Round(time.Second), Decisions: s.decisions.Load(), Errors: s.errs.Load(), Fault: fault}
	smp.Goroutines = infoInt(ctx, s.rdb, "goroutines")
	smp.RSSKiB, smp.FDs = procUsage(s.ch.pid())
	s.rep.Samples = append(s.rep.Samples, smp)
	fmt.Fprintf(s.progress, "soak: %v decisions=%d errors=%d goroutines=%d rss=%d KiB fds=%d %s\n",
		smp.At, smp.Decisions, smp.Errors, smp.Goroutines, smp.RSSKiB, smp.FDs, fault)
}

// faultsUntil samples every cfg.Sample and injects the next fault every
// cfg.Fault until lctx, the load's, ends.
func (s *soak) faultsUntil(ctx, lctx context.Context, cfg SoakConfig) {
	faults := s.faults(ctx)
	tick := time.NewTicker(cfg.Sample)
	defer tick.Stop()
	nextFault, fi := time.Now().Add(cfg.Fault), 0
	pending := ""
	for lctx.Err() == nil {
		select {
		case <-tick.C:
			s.sample(ctx, pending)
			pending = ""
		case <-lctx.Done():
		}
		if time.Now().After(nextFault) && lctx.Err() == nil {
			f := faults[fi%len(faults)]()
			s.rep.Faults = append(s.rep.Faults, f)
			pending = strings.TrimSpace(pending + " " + f)
			fi++
			nextFault = time.Now().Add(cfg.Fault)
		}
	}
}

// faults are the soak's faults, in turn; each says what it did.
func (s *soak) faults(ctx context.Context) []func() string {
	return []func() string{
		func() string {
			if err := s.rig.rc.ScriptFlushAll(ctx); err != nil {
				return "script flush failed: " + err.Error()
			}
			return "SCRIPT FLUSH on every node"
		},
		func() string {
			n, err := s.rig.rc.PrimaryForKey(ctx, "sluice:{hot:1}")
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
				cl := redis.NewClient(&redis.Options{Addr: s.ch.addr, MaxRetries: -1})
				_ = cl.Ping(ctx).Err()
				_ = cl.Close()
			}
			return "500 connects and disconnects"
		},
	}
}

// infoInt reads one integer field of INFO; -1 when there is none.
func infoInt(ctx context.Context, rdb *redis.Client, field string) int {
	text, err := rdb.Info(ctx).Result()
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(infoFields(text)[field])
	if err != nil {
		return -1
	}
	return n
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
func (r *SoakReport) Markdown() string { return render("soak", r) }

// RSSMiB is the resident set in MiB.
func (s SoakSample) RSSMiB() float64 { return float64(s.RSSKiB) / 1024 }
