package layercheck

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/keyslot"
	"github.com/sluice-rl/sluice/internal/localredis"
)

// The nemesis of issue 29: one goroutine per run that, while rapid's
// histories run, injects one fault at a time at a random moment, holds it
// a random 0.2–3 s, heals it, waits until the store answers again and
// records it in a FaultLog. The first faults are a shuffled round of every
// kind it can inject; then kinds are drawn at random.
type nemesis struct {
	w    *world
	eu   *localredis.Cluster
	home *localredis.Node
	log  FaultLog
	rng  *rand.Rand
	seed uint64
	// link: the cluster runs in a network namespace, where a node's link
	// can be cut (Node.SetLink); else the reason it does not, in noLink.
	link   bool
	noLink string

	mu       sync.Mutex
	counts   map[string]int // faults injected, by kind
	problems []string       // the nemesis's own failures (a heal that never came back)
	unknown  int            // operations of unknown outcome: their process was being killed
	// tolerated are "store unavailable" answers of commands other than
	// takes during a store fault, by command.
	tolerated map[string]int
	round     []string // the kinds of the first round not yet run
	slotMoves int

	stop chan struct{}
	done chan struct{}
}

// TestLayersNemesis is TestLayers with the nemesis: while the histories
// run, one fault at a time (every kind at least once), and each key's
// admissions past its bound must be within the fault's written bound
// (docs/reliability.md, "Bounds under faults"). LAYERCHECK_DURATION
// (default 45s) bounds it, and it lasts until every kind has run once, at
// most 110 s; every finding is recorded and the test fails once at the end.
func TestLayersNemesis(t *testing.T) { runLayers(t, true) }

// storeKinds are the kinds that make the store (or part of it) fail to
// answer; a sluice kill and a script flush do not.
var storeKinds = []string{FaultFreeze, FaultCut, FaultKill, FaultRestartEmpty, FaultSlotMove, FaultHomeDown}

func newNemesis(w *world, eu *localredis.Cluster, home *localredis.Node, noLink string) *nemesis {
	seed := rand.Uint64()
	if s := os.Getenv("LAYERCHECK_NEMESIS_SEED"); s != "" {
		_, _ = fmt.Sscan(s, &seed)
	}
	n := &nemesis{w: w, eu: eu, home: home, link: eu.Netns() != "", noLink: noLink, seed: seed,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), counts: map[string]int{}, tolerated: map[string]int{},
		stop: make(chan struct{}), done: make(chan struct{})}
	n.round = slices.Clone(n.kinds())
	n.rng.Shuffle(len(n.round), func(i, j int) { n.round[i], n.round[j] = n.round[j], n.round[i] })
	return n
}

// kinds are the kinds this nemesis can inject here.
func (n *nemesis) kinds() []string {
	var out []string
	for _, k := range FaultKinds {
		if k == FaultCut && !n.link {
			continue
		}
		out = append(out, k)
	}
	return out
}

// roundDone reports whether every kind has run once.
func (n *nemesis) roundDone() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.round) == 0
}

func (n *nemesis) problem(format string, args ...any) {
	n.mu.Lock()
	n.problems = append(n.problems, fmt.Sprintf(format, args...))
	n.mu.Unlock()
}

// run injects faults until stop is closed, then returns with every fault
// healed.
func (n *nemesis) run(t *testing.T) {
	defer close(n.done)
	ctx := context.Background()
	for {
		gap := time.Duration(300+n.rng.IntN(1700)) * time.Millisecond
		select {
		case <-n.stop:
			return
		case <-time.After(gap): // a random moment of the histories
		}
		n.mu.Lock()
		var kind string
		if len(n.round) > 0 {
			kind, n.round = n.round[0], n.round[1:]
		} else {
			ks := n.kinds()
			kind = ks[n.rng.IntN(len(ks))]
		}
		n.mu.Unlock()
		hold := time.Duration(200+n.rng.IntN(2800)) * time.Millisecond
		if err := n.inject(ctx, kind, hold); err != nil {
			n.problem("%s: %v", kind, err)
			t.Logf("nemesis: %s failed: %v", kind, err)
			if strings.Contains(err.Error(), "not healed") {
				return // the store did not come back: stop injecting
			}
			continue
		}
		n.mu.Lock()
		n.counts[kind]++
		n.mu.Unlock()
		fs := n.log.All()
		f := fs[len(fs)-1]
		t.Logf("nemesis: %s of %s, slots %v, %s held %v, healed and answered %v after it began",
			f.Kind, f.Target, f.Slots, f.From.Format("15:04:05.000"), hold, f.To.Sub(f.From).Round(time.Millisecond))
	}
}

// begin records a fault starting now.
func (n *nemesis) begin(kind, target string, slots [][2]int) *Fault {
	return n.log.Begin(Fault{Kind: kind, Target: target, Slots: slots, From: time.Now()})
}

// end waits until the store answers again (the cluster healthy, every
// process deciding a key of the fault's slots from the store) and ends f.
func (n *nemesis) end(ctx context.Context, f *Fault) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := n.eu.WaitHealthy(ctx); err != nil {
		return fmt.Errorf("not healed: the cluster is not healthy: %v", err)
	}
	if f.Kind == FaultHomeDown {
		if err := n.home.Client().Ping(ctx).Err(); err != nil {
			return fmt.Errorf("not healed: home: %v", err)
		}
	}
	keys := probeKeys(f.Slots)
	for _, p := range n.w.procs {
		for _, key := range keys {
			if err := n.probe(ctx, p, key); err != nil {
				return fmt.Errorf("not healed: %s on %s: %v", key, p.name, err)
			}
		}
	}
	n.log.End(f, time.Now())
	return nil
}

// probe polls process p until it decides key from the store, through
// every door and both tenants' clients (the doors' connections to a
// restarted process come back at their own pace).
func (n *nemesis) probe(ctx context.Context, p *proc, key string) error {
	var last string
	for {
		ok := true
		for _, tn := range []*tenant{p.tenant, p.rival} {
			k := key
			if tn == p.rival {
				k = "ev." + key // the rival's keys: ev.*, the same slot
			}
			r, err := tn.take(ctx, "RL.PEEK", k, 1)
			if err != nil || r.DecidedBy != "store" {
				ok, last = false, fmt.Sprintf("RL.PEEK by %s: %v %v", tn.role, r, err)
				break
			}
		}
		if ok {
			if _, err := p.httpTake(ctx, key, 0); err != nil && !isHTTPStatus(err) {
				ok, last = false, fmt.Sprintf("HTTP: %v", err)
			}
		}
		if ok {
			req := &rlsv3.RateLimitRequest{Domain: "gw", Descriptors: []*ratelimitv3.RateLimitDescriptor{
				{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "nemesis-probe"}}}}}
			for _, tn := range []*tenant{p.tenant, p.rival} {
				c, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := tn.gc.ShouldRateLimit(c, req, grpc.WaitForReady(true))
				cancel()
				if err != nil && status.Code(err) != codes.PermissionDenied {
					ok, last = false, fmt.Sprintf("gRPC by %s: %v", tn.role, err)
					break
				}
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%v; last: %s", ctx.Err(), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func isHTTPStatus(err error) bool {
	var he *httpError
	return errors.As(err, &he)
}

// probeKeys are user keys of the nemesis's own (under the catch-all
// policy, used by no iteration; the rival probes them behind "ev.") whose state lives in each range of slots;
// one key when slots is nil.
func probeKeys(slots [][2]int) []string {
	if len(slots) == 0 {
		return []string{"nemesis.probe"}
	}
	var out []string
	for _, r := range slots {
		for i := 0; ; i++ {
			k := fmt.Sprintf("nemesis.probe{%d}", i)
			if s := keyslot.Slot(cluster.Key(k)); s >= r[0] && s <= r[1] {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// slotsOf are the slot ranges node serves now, by CLUSTER SHARDS.
func (n *nemesis) slotsOf(ctx context.Context, node *localredis.Node) ([][2]int, error) {
	shards, err := localredis.Shards(ctx, node.Client())
	if err != nil {
		return nil, err
	}
	var out [][2]int
	for _, sh := range shards {
		if sh.Primary != node.Addr {
			continue
		}
		for _, r := range sh.Slots {
			out = append(out, [2]int{int(r.Start), int(r.End)})
		}
	}
	return out, nil
}

// nemesisSteps are rapid's steps per iteration under the nemesis (unless
// set): about 2 s of history, so that one iteration's keys see a fault's
// before and after.
const nemesisSteps = 300

// primary is the primary that owns a key the running iteration has
// admitted on (a random one before it has any): a fault of a node no key
// in use lives on shows nothing.
func (n *nemesis) primary(ctx context.Context) (*localredis.Node, [][2]int, error) {
	ps := n.eu.Primaries()
	if len(ps) == 0 {
		return nil, nil, errors.New("no primary")
	}
	p := ps[n.rng.IntN(len(ps))]
	if slot, ok := n.keySlot(false); ok {
		if q, err := n.eu.PrimaryForKey(ctx, cluster.Key(probeKeys([][2]int{{slot, slot}})[0])); err == nil {
			p = q
		}
	}
	slots, err := n.slotsOf(ctx, p)
	return p, slots, err
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// inject runs one fault of kind, held for hold, healed, recorded.
func (n *nemesis) inject(ctx context.Context, kind string, hold time.Duration) error {
	switch kind {
	case FaultFreeze:
		p, slots, err := n.primary(ctx)
		if err != nil {
			return err
		}
		f := n.begin(kind, p.Addr, slots)
		if err := p.Pause(); err != nil {
			return err
		}
		sleepCtx(ctx, hold)
		if err := p.Resume(); err != nil {
			return err
		}
		return n.end(ctx, f)
	case FaultCut:
		p, slots, err := n.primary(ctx)
		if err != nil {
			return err
		}
		f := n.begin(kind, p.Addr, slots)
		if err := p.SetLink(false); err != nil {
			return err
		}
		sleepCtx(ctx, hold)
		if err := p.SetLink(true); err != nil {
			return err
		}
		return n.end(ctx, f)
	case FaultKill:
		return n.kill(ctx, hold)
	case FaultRestartEmpty:
		p, slots, err := n.primary(ctx)
		if err != nil {
			return err
		}
		// its replicas killed with it (Cluster.RestartEmpty), so that none
		// takes its place: it comes back empty, they resync from it
		f := n.begin(kind, p.Addr, slots)
		lost := n.w.overridesOn(slots) // a primary restarted empty there loses them with the rest of its data
		if err := n.eu.RestartEmpty(ctx, p); err != nil {
			return err
		}
		err = n.end(ctx, f)
		n.w.loseRuntimePolicies(lost, f.From, f.To)
		return err
	case FaultScriptFlush:
		f := n.begin(kind, "every node", nil)
		if err := n.eu.ScriptFlushAll(ctx); err != nil {
			return err
		}
		return n.end(ctx, f)
	case FaultSlotMove:
		return n.slotMove(ctx, hold)
	case FaultSluiceKill:
		p := n.w.procs[n.rng.IntN(len(n.w.procs))]
		p.life.Lock()
		f := n.begin(kind, p.name, nil)
		err := p.crash(hold)
		p.life.Unlock()
		if err != nil {
			return err
		}
		return n.end(ctx, f)
	case FaultHomeDown:
		f := n.begin(kind, "home", nil)
		if err := n.home.Pause(); err != nil {
			return err
		}
		sleepCtx(ctx, hold)
		if err := n.home.Resume(); err != nil {
			return err
		}
		return n.end(ctx, f)
	}
	return fmt.Errorf("unknown fault kind %q", kind)
}

// kill holds a primary's replication back (Cluster.HoldReplication: its
// replica frozen and its connection closed by the primary, so that what
// the primary writes from then on reaches only its own memory) for a
// moment, kills the primary, promotes the replica (Cluster.Takeover: no
// agreement needed) and after hold restarts the old primary, which
// rejoins as the new one's replica.
func (n *nemesis) kill(ctx context.Context, hold time.Duration) error {
	var p, rep *localredis.Node
	if q, _, err := n.primary(ctx); err == nil {
		if rs := n.eu.ReplicasOf(q); len(rs) > 0 {
			p, rep = q, rs[0]
		}
	}
	ps := n.eu.Primaries()
	for _, c := range n.rng.Perm(len(ps)) {
		if rs := n.eu.ReplicasOf(ps[c]); p == nil && len(rs) > 0 {
			p, rep = ps[c], rs[0]
		}
	}
	if p == nil {
		return errors.New("no primary with a replica")
	}
	slots, err := n.slotsOf(ctx, p)
	if err != nil {
		return err
	}
	f := n.begin(FaultKill, p.Addr, slots)
	// Held back from before the call: the replica may lack what the
	// primary wrote from the moment HoldReplication began killing its link,
	// not only from when it returned.
	heldBack := time.Now()
	held := n.w.overridesOn(slots) // the runtime policies the replica keeps, when p holds their hash
	release, err := n.eu.HoldReplication(ctx, p)
	if err != nil {
		return err
	}
	sleepCtx(ctx, time.Duration(200+n.rng.IntN(600))*time.Millisecond) // spends the replica will lack
	if err := p.Kill(); err != nil {
		_ = release()
		return err
	}
	n.log.mu.Lock()
	f.HeldBack, f.From = heldBack, time.Now()
	n.log.mu.Unlock()
	atKill := n.w.overridesOn(slots)
	if err := release(); err != nil {
		return err
	}
	if err := n.eu.Takeover(ctx, rep); err != nil {
		return err
	}
	n.w.revertRuntimePolicies(held, atKill, f.From, time.Now())
	sleepCtx(ctx, hold)
	if err := p.Restart(ctx); err != nil {
		return err
	}
	return n.end(ctx, f)
}

// slotMove moves, live, the slot of a key the current iteration has
// admitted on (a tb key by preference) to another primary: BeginMove
// (IMPORTING, MIGRATING), its keys migrated, held (-ASK: the keys on the
// target, the slot still the source's), the keys made meanwhile migrated,
// then Finish (SETSLOT NODE on every primary).
func (n *nemesis) slotMove(ctx context.Context, hold time.Duration) error {
	slot := n.slotInUse()
	src, err := n.eu.PrimaryForKey(ctx, cluster.Key(probeKeys([][2]int{{slot, slot}})[0]))
	if err != nil {
		return err
	}
	var dsts []*localredis.Node
	for _, p := range n.eu.Primaries() {
		if p.ID != src.ID {
			dsts = append(dsts, p)
		}
	}
	if len(dsts) == 0 {
		return errors.New("one primary: nowhere to move a slot")
	}
	dst := dsts[n.rng.IntN(len(dsts))]
	f := n.begin(FaultSlotMove, src.Addr+"→"+dst.Addr, [][2]int{{slot, slot}})
	m, err := n.eu.BeginMove(ctx, slot, dst)
	if err != nil {
		return err
	}
	if _, err := m.MoveKeys(ctx); err != nil {
		return err
	}
	sleepCtx(ctx, hold)
	if _, err := m.MoveKeys(ctx); err != nil {
		return err
	}
	if err := m.Finish(ctx); err != nil {
		return err
	}
	n.mu.Lock()
	n.slotMoves++
	n.mu.Unlock()
	return n.end(ctx, f)
}

// slotInUse is the slot of a key the current iteration has admitted on,
// a tb key's by preference; a random slot when there is none yet.
func (n *nemesis) slotInUse() int {
	if s, ok := n.keySlot(true); ok {
		return s
	}
	return n.rng.IntN(16384)
}

// keySlot is the slot of a random key the running iteration has admitted
// on (with tb, a tb.* key's when there is one).
func (n *nemesis) keySlot(tb bool) (int, bool) {
	n.w.mu.Lock()
	it := n.w.cur
	n.w.mu.Unlock()
	if it == nil {
		return 0, false
	}
	it.mu.Lock()
	var tbs, all []int
	for key, k := range it.rl {
		if len(k.Slots) == 1 && len(k.Adm) > 0 {
			all = append(all, k.Slots[0])
			if k.Policy == "tb" && strings.HasPrefix(key, "tb.") {
				tbs = append(tbs, k.Slots[0])
			}
		}
	}
	it.mu.Unlock()
	slices.Sort(all) // the map's order is not the seed's
	slices.Sort(tbs)
	switch {
	case tb && len(tbs) > 0:
		return tbs[n.rng.IntN(len(tbs))], true
	case len(all) > 0:
		return all[n.rng.IntN(len(all))], true
	}
	return 0, false
}

// stopAndWait ends the nemesis (the fault under way is healed first).
func (n *nemesis) stopAndWait() {
	select {
	case <-n.stop:
	default:
		close(n.stop)
	}
	<-n.done
}

// during reports whether a fault of one of kinds (on target, when it is
// not "") overlaps [a, b].
func (n *nemesis) during(kinds []string, target string, a, b time.Time) bool {
	return n.within(kinds, target, a, b, 0)
}

// within is during with each fault's window extended by after past its
// healing.
func (n *nemesis) within(kinds []string, target string, a, b time.Time, after time.Duration) bool {
	for _, f := range n.log.All() {
		if !slices.Contains(kinds, f.Kind) || target != "" && f.Target != target {
			continue
		}
		if !f.From.After(b) && (f.To.IsZero() || !f.To.Add(after).Before(a)) {
			return true
		}
	}
	return false
}

// faultsAt names the faults that overlap [a, b], for a finding's detail.
func (n *nemesis) faultsAt(a, b time.Time) string {
	var out []string
	for _, f := range n.log.All() {
		if !f.From.After(b) && (f.To.IsZero() || !f.To.Add(Settle(f.Kind)).Before(a)) {
			d := fmt.Sprintf("%s of %s slots %v from %s to %s", f.Kind, f.Target, f.Slots, f.From.Format("15:04:05.000"), f.To.Format("15:04:05.000"))
			if !f.HeldBack.IsZero() {
				d += " (replication held back from " + f.HeldBack.Format("15:04:05.000") + ")"
			}
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return "(no fault near)"
	}
	return "(near: " + strings.Join(out, "; ") + ")"
}

// faultSummary is the nemesis's part of the summary: the faults by kind,
// the fault table, and what was tolerated.
func (n *nemesis) summary(t *testing.T, excess []Excess) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var counts []string
	for _, k := range FaultKinds {
		counts = append(counts, fmt.Sprintf("%s=%d", k, n.counts[k]))
	}
	line := fmt.Sprintf("layercheck nemesis (seed %d): faults {%s}, operations of unknown outcome (their sluice killed) %d, store-unavailable answers tolerated during store faults %v",
		n.seed, strings.Join(counts, " "), n.unknown, n.tolerated)
	t.Log(line)
	fmt.Fprintln(os.Stderr, line)
	table := FaultTable(n.log.All(), excess)
	t.Logf("fault table:\n%s", table)
	fmt.Fprintln(os.Stderr, table)
	if !n.link {
		t.Logf("nemesis: no cut: %s", n.noLink)
	}
	for _, p := range n.problems {
		t.Errorf("nemesis: %s", p)
	}
	for _, k := range n.kinds() {
		if n.counts[k] == 0 {
			t.Errorf("nemesis: fault kind %s never ran", k)
		}
	}
}

// overridesOn is a copy of the runtime policies in force when their hash
// (cluster.PoliciesKey) is on one of slots (never nil then, even with none
// in force), else nil.
func (w *world) overridesOn(slots [][2]int) map[string]Variant {
	s := keyslot.Slot(cluster.PoliciesKey)
	for _, r := range slots {
		if r[0] <= s && s <= r[1] {
			w.mu.Lock()
			defer w.mu.Unlock()
			out := maps.Clone(w.overrides)
			if out == nil {
				out = map[string]Variant{}
			}
			return out
		}
	}
	return nil
}

// revertRuntimePolicies records that a replica that took over in [from,
// to] holds the runtime policies as they were when its replication was held
// back (held), not as they were at the kill (atKill): an RL.POLICY SET or
// DEL between the two is undone (seen: a DEL of the iteration's restore
// undone, the previous iteration's override in force again). Only a name
// that nothing changed since the kill is put back; instances see it from
// from, and the undone one may last until their next sync after to.
func (w *world) revertRuntimePolicies(held, atKill map[string]Variant, from, to time.Time) {
	if held == nil || atKill == nil {
		return // the policies' hash is not on the killed primary
	}
	w.change(func() {
		if w.overrides == nil {
			w.overrides = map[string]Variant{}
		}
		for name := range unionOf(held, atKill) {
			was, inHeld := held[name]
			killed, inKill := atKill[name]
			if inHeld == inKill && was == killed {
				continue // not changed in the held-back window
			}
			if cur, ok := w.overrides[name]; ok != inKill || cur != killed {
				continue // changed again since the kill: that write is the new primary's
			}
			if inHeld {
				w.overrides[name] = was
			} else {
				delete(w.overrides, name)
			}
		}
	}, from, to, runtimeProp)
}

func unionOf(a, b map[string]Variant) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// loseRuntimePolicies records that the runtime policies of lost went with
// a primary restarted empty in [from, to]: every instance is back on its
// file's policy from from (the moment the hash was gone), and its own copy
// of the lost one may last until its next sync after to (runtimeProp). A
// policy set again meanwhile (another variant) is kept.
func (w *world) loseRuntimePolicies(lost map[string]Variant, from, to time.Time) {
	if len(lost) == 0 {
		return
	}
	w.change(func() {
		for name, v := range lost {
			if cur, ok := w.overrides[name]; ok && cur == v {
				delete(w.overrides, name)
			}
		}
	}, from, to, runtimeProp)
}
