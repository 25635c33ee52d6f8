package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
)

// Defaults of RestartLabConfig.
const (
	DefaultRestartLabDown        = time.Second
	DefaultRestartLabWindow      = time.Second
	DefaultRestartLabNodeTimeout = time.Second
	DefaultRestartLabMaxRequests = 2_000_000 // per row
	DefaultRestartLabInstances   = 2
	DefaultRestartLabWorkers     = 4 // per instance
	DefaultRestartLabTimeout     = 100 * time.Millisecond
)

// restartHoldTimeout is the cluster-node-timeout while the owner is down
// for a restart: long enough that its replica is not promoted meanwhile.
const restartHoldTimeout = 60 * time.Second

// RestartLabConfig says what `sluice-lab restart` measures. The zero value: two
// sluice processes, 4 goroutines each sending RL.TAKE of one key, through
// three events on the key's primary: SCRIPT FLUSH, a SIGKILL and restart
// (empty, 1 s down, no failover) and a SIGKILL with the replica promoted
// (cluster-node-timeout 1 s). It always starts its own cluster: it must
// kill a node.
type RestartLabConfig struct {
	// Binary is the sluice binary; "" means sluiceBinary's.
	Binary string
	// Down is how long the killed primary stays down before its restart;
	// 0 means 1s. Window is the least time the load runs after each event;
	// 0 means 1s. The load also runs until the key is decided by the store
	// again.
	Down, Window time.Duration
	// NodeTimeout is cluster-node-timeout during the failover row; 0 means
	// 1s.
	NodeTimeout time.Duration
	// MaxRequests bounds the requests of each row; 0 means 2,000,000.
	MaxRequests int64
	// Instances is the sluice processes; 0 means 2. Workers is goroutines
	// per process; 0 means 4.
	Instances, Workers int
	// Limit and Rate (per second) are the bucket; 0 means 100 and 50.
	Limit, Rate int64
	// Timeout is the store deadline of the policy file; 0 means 100ms.
	Timeout time.Duration
	// Now is the clock of the report's date; nil means time.Now.
	Now func() time.Time
}

func (c *RestartLabConfig) resolve() error {
	c.Down, c.Window = cmp.Or(c.Down, DefaultRestartLabDown), cmp.Or(c.Window, DefaultRestartLabWindow)
	c.NodeTimeout = cmp.Or(c.NodeTimeout, DefaultRestartLabNodeTimeout)
	c.Timeout = cmp.Or(c.Timeout, DefaultRestartLabTimeout)
	c.MaxRequests = cmp.Or(c.MaxRequests, DefaultRestartLabMaxRequests)
	c.Instances, c.Workers = cmp.Or(c.Instances, DefaultRestartLabInstances), cmp.Or(c.Workers, DefaultRestartLabWorkers)
	c.Limit, c.Rate = cmp.Or(c.Limit, DefaultLabLimit), cmp.Or(c.Rate, DefaultLabRate)
	orNow(&c.Now)
	if c.Down < 0 || c.Window < 0 || c.NodeTimeout < 0 || c.Timeout < 0 || c.MaxRequests < 0 || c.Instances < 0 || c.Workers < 0 || c.Limit < 0 || c.Rate < 0 {
		return errors.New("lab restart: durations, counts, limit and rate must not be negative")
	}
	if c.Down >= restartHoldTimeout/2 {
		return fmt.Errorf("lab restart: down %v: want under %v, or the primary is failed over", c.Down, restartHoldTimeout/2)
	}
	return nil
}

// rig: the lab always starts its own cluster, as it must kill a node.
func (c *RestartLabConfig) rig() rigSpec {
	return rigSpec{name: "lab restart", binary: c.Binary, nodeTimeout: c.NodeTimeout, now: c.Now,
		policy: seedPolicy("restart", c.Timeout, c.Limit, c.Rate, "local", 0.5), tool: "go-redis, one request in flight per goroutine"}
}

// config is the report's config, for RunLab.
func (rep *RestartLabReport) config() labConfig { return &rep.Config }

// RestartLabRow is one event on the key's primary.
type RestartLabRow struct {
	Event string
	// Requests, Allowed, Errors count the replies of every process from
	// the event until the key is strict again (and at least Window).
	Requests, Allowed, Errors int64
	FirstError                string
	DecidedBy                 map[string]int64
	Slowest                   time.Duration
	// NoScript is the NOSCRIPT replies of the node that owns the key after
	// the event, Evals its EVAL and SCRIPT LOAD calls: the script sent again.
	NoScript, Evals int64
	// Strict is from the event to the first reply decided by the store
	// again.
	Strict time.Duration
	// Note says what happened to the node: promotion time, restart.
	Note  string
	Owner string // the key's primary after the event
}

// Verdict reads the row: error replies are the failure; otherwise the
// failure policy or the store answered everything.
func (r RestartLabRow) Verdict() string {
	if r.Errors > 0 {
		return fmt.Sprintf("%d error replies", r.Errors)
	}
	if r.NoScript > 0 {
		return "no error reply; NOSCRIPT met and the script reloaded"
	}
	return "no error reply"
}

// RestartLabReport is `sluice-lab restart`: the experiment (run) and what it measured.
type RestartLabReport struct {
	Config RestartLabConfig
	Key    string
	Rows   []RestartLabRow
	Pids   []int
	LabRun
}

// run is three events on the primary that owns one key while two sluice
// processes decide it: SCRIPT FLUSH on the owner; SIGKILL and a restart
// Config.Down later with an empty data set and script cache (the
// cluster holds off failover meanwhile); SIGKILL with the replica promoted
// after Config.NodeTimeout. For each it counts the replies from the event
// until the key is decided by the store again, the error replies (there
// must be none), and the NOSCRIPT replies and EVAL reloads on the owner.
func (rep *RestartLabReport) run(ctx context.Context, rig *rig) error {
	clients, err := rig.startSluice(ctx, rep.Config.Instances, rig.seeds, rig.policy, rep.Config.Workers)
	if err != nil {
		return err
	}
	l := &restartLab{cfg: rep.Config, rig: rig, clients: clients, key: "acme"}
	rep.Key, rep.Pids = l.key, rig.pids()
	for _, cl := range clients {
		if err := mustStore(ctx, cl, l.key); err != nil {
			return rig.errorf("%w", err)
		}
	}
	for _, ev := range []func(context.Context) (RestartLabRow, error){l.flush, l.restart, l.failover} {
		row, err := ev(ctx)
		if row.Event != "" {
			rep.Rows = append(rep.Rows, row)
			rig.logf("%s: %d requests, %d allowed, %d errors, slowest %v, decided_by %s, NOSCRIPT %d, EVAL %d, strict %v after; %s",
				row.Event, row.Requests, row.Allowed, row.Errors, row.Slowest.Round(time.Millisecond), formatCounts(row.DecidedBy),
				row.NoScript, row.Evals, row.Strict.Round(time.Millisecond), row.Note)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

type restartLab struct {
	cfg     RestartLabConfig
	rig     *rig
	clients []*redis.Client
	key     string
}

// owner is the primary of the key now.
func (l *restartLab) owner(ctx context.Context) (*localredis.Node, error) {
	return l.rig.rc.PrimaryForKey(ctx, cluster.Key(l.key))
}

// setNodeTimeout sets cluster-node-timeout on every running node.
func (l *restartLab) setNodeTimeout(ctx context.Context, d time.Duration) error {
	for _, n := range l.rig.rc.Nodes() {
		if !n.Running() {
			continue
		}
		if err := n.Client().ConfigSet(ctx, "cluster-node-timeout", strconv.FormatInt(d.Milliseconds(), 10)).Err(); err != nil {
			return l.rig.errorf("CONFIG SET cluster-node-timeout on %s: %w", n.Addr, err)
		}
	}
	return nil
}

// scriptStats reads a node's NOSCRIPT replies and its script loads (EVAL
// and SCRIPT LOAD calls); zeros when it does not answer.
func scriptStats(ctx context.Context, n *localredis.Node) (noscript, evals int64) {
	text, err := n.Client().Info(ctx, "errorstats", "commandstats").Result()
	if err != nil {
		return 0, 0
	}
	f := infoFields(text)
	return commandStat(f["errorstat_NOSCRIPT"])["count"], commandStat(f["cmdstat_eval"])["calls"] + commandStat(f["cmdstat_script|load"])["calls"]
}

// run starts the load, applies fault, then from that moment polls the key
// until the store decides it again while heal brings the node back (or
// reports how the cluster did); the load runs until the first strict reply
// and at least Window after the fault. The notes of fault and heal say
// what happened.
func (l *restartLab) run(ctx context.Context, name string, fault, heal func() (note string, err error)) (RestartLabRow, error) {
	row := RestartLabRow{Event: name}
	stop := make(chan struct{})
	done := make(chan loadResult, 1)
	go func() {
		done <- drive(ctx, l.clients, loadSpec{
			key: l.key, workers: l.cfg.Workers, pipeline: 1, duration: time.Minute,
			maxRequests: l.cfg.MaxRequests, limit: l.cfg.Limit, stop: stop,
		})
	}()
	stopped := false
	finish := func() loadResult {
		if !stopped {
			close(stop)
			stopped = true
		}
		return <-done
	}
	defer func() {
		if !stopped {
			finish()
		}
	}()
	began := time.Now()
	note, err := fault()
	if err != nil {
		return row, err
	}
	type strict struct {
		at  time.Time
		err error
	}
	strictc := make(chan strict, 1)
	go func() {
		at, err := waitStore(ctx, l.clients[0], l.key, 60*time.Second)
		strictc <- strict{at, err}
	}()
	if heal != nil {
		more, err := heal()
		note = strings.TrimPrefix(note+"; "+more, "; ")
		if err != nil {
			row.Note = note
			return row, err
		}
	}
	row.Note = note
	st := <-strictc
	if st.err != nil {
		return row, l.rig.errorf("%s: %w", name, st.err)
	}
	row.Strict = st.at.Sub(began)
	if err := sleep(ctx, time.Until(began.Add(l.cfg.Window))); err != nil {
		return row, err
	}
	ld := finish()
	row.Requests = ld.admitted + ld.rejected + ld.errors
	row.Allowed, row.Errors, row.DecidedBy = ld.admitted, ld.errors, ld.by
	row.Slowest, row.FirstError = maxDuration(ld.lat), ld.firstError()
	return row, nil
}

// flush is SCRIPT FLUSH on the owner: no downtime, NOSCRIPT on the next
// EVALSHA.
func (l *restartLab) flush(ctx context.Context) (RestartLabRow, error) {
	owner, err := l.owner(ctx)
	if err != nil {
		return RestartLabRow{}, err
	}
	ns0, ev0 := scriptStats(ctx, owner)
	row, err := l.run(ctx, "SCRIPT FLUSH on the owning primary", func() (string, error) {
		if err := owner.Client().ScriptFlush(ctx).Err(); err != nil {
			return "", l.rig.errorf("SCRIPT FLUSH on %s: %w", owner.Addr, err)
		}
		return "the script cache emptied, the node kept serving", nil
	}, nil)
	ns1, ev1 := scriptStats(ctx, owner)
	row.NoScript, row.Evals, row.Owner = ns1-ns0, ev1-ev0, owner.Addr
	return row, err
}

// kill is the fault that SIGKILLs node and notes when in *at.
func (l *restartLab) kill(node *localredis.Node, at *time.Time) func() (string, error) {
	return func() (string, error) {
		pid := node.Pid
		if err := node.Kill(); err != nil {
			return "", err
		}
		*at = time.Now()
		l.rig.logf("SIGKILL %s (pid %d)", node.Addr, pid)
		return "", nil
	}
}

// restart kills the owner, keeps it down for Down and starts it again on
// its folder with no data and no scripts; failover is held off meanwhile.
func (l *restartLab) restart(ctx context.Context) (RestartLabRow, error) {
	if err := l.setNodeTimeout(ctx, restartHoldTimeout); err != nil {
		return RestartLabRow{}, err
	}
	owner, err := l.owner(ctx)
	if err != nil {
		return RestartLabRow{}, err
	}
	name := fmt.Sprintf("primary SIGKILLed, restarted empty %v later (no failover)", l.cfg.Down)
	var t0 time.Time
	row, err := l.run(ctx, name, l.kill(owner, &t0), func() (string, error) {
		if err := sleep(ctx, time.Until(t0.Add(l.cfg.Down))); err != nil {
			return "", err
		}
		if err := owner.Restart(ctx); err != nil {
			return "", err
		}
		up := time.Since(t0)
		if err := l.rig.rc.WaitHealthy(ctx); err != nil {
			return "", err
		}
		return fmt.Sprintf("restarted as pid %d %v after the kill; cluster healthy %v after the kill", owner.Pid,
			up.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond)), nil
	})
	// The restarted process counts from zero: every NOSCRIPT and EVAL is
	// since the restart.
	row.NoScript, row.Evals = scriptStats(ctx, owner)
	row.Owner = owner.Addr
	if err == nil {
		if now, oerr := l.owner(ctx); oerr != nil || now != owner {
			err = l.rig.errorf("%s is no longer the owner after its restart (failover?): %v", owner.Addr, oerr)
		}
	}
	return row, err
}

// failover kills the owner with a short cluster-node-timeout: its replica
// is promoted.
func (l *restartLab) failover(ctx context.Context) (RestartLabRow, error) {
	// The replica of a node restarted a moment ago must be in sync, or it
	// may not stand for election.
	if err := l.rig.rc.WaitHealthy(ctx); err != nil {
		return RestartLabRow{}, err
	}
	if err := l.setNodeTimeout(ctx, l.cfg.NodeTimeout); err != nil {
		return RestartLabRow{}, err
	}
	owner, err := l.owner(ctx)
	if err != nil {
		return RestartLabRow{}, err
	}
	replicas := l.rig.rc.ReplicasOf(owner)
	if len(replicas) == 0 {
		return RestartLabRow{}, l.rig.errorf("%s has no replica to promote", owner.Addr)
	}
	before := map[string][2]int64{}
	for _, r := range replicas {
		ns, ev := scriptStats(ctx, r)
		before[r.Addr] = [2]int64{ns, ev}
	}
	var promoted *localredis.Node
	name := fmt.Sprintf("primary SIGKILLed, replica promoted (cluster-node-timeout %v)", l.cfg.NodeTimeout)
	var t0 time.Time
	row, err := l.run(ctx, name, l.kill(owner, &t0), func() (string, error) {
		p, err := l.rig.rc.WaitNewPrimary(ctx, owner)
		if err != nil {
			return "", err
		}
		promoted = p
		return fmt.Sprintf("%s promoted %v after the kill", p.Addr, time.Since(t0).Round(time.Millisecond)), nil
	})
	if promoted != nil {
		ns, ev := scriptStats(ctx, promoted)
		row.NoScript, row.Evals = ns-before[promoted.Addr][0], ev-before[promoted.Addr][1]
		row.Owner = promoted.Addr
	}
	return row, err
}

// Markdown renders the rows.
func (r *RestartLabReport) Markdown() string { return render("restart", r) }
