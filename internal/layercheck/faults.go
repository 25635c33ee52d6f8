package layercheck

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The kinds of fault the nemesis injects (issue 29). docs/reliability.md
// ("Bounds under faults") states, for each, the most a key may admit past
// its limit while it lasts and for its settle time after.
const (
	FaultFreeze       = "freeze"        // a primary SIGSTOPped, then SIGCONT
	FaultCut          = "cut"           // a primary's link cut (network namespace), then back
	FaultKill         = "kill"          // a primary SIGKILLed and its replica promoted (its replication held back from HeldBack)
	FaultRestartEmpty = "restart-empty" // a primary restarted empty, with no replica to take its place
	FaultScriptFlush  = "script-flush"  // SCRIPT FLUSH on every node
	FaultSlotMove     = "slot-move"     // a live move of a slot holding keys in use
	FaultSluiceKill   = "sluice-kill"   // a sluice process SIGKILLed and started again
	FaultHomeDown     = "home-down"     // the home store of the region unreachable
)

// FaultKinds lists every kind, in the order the report prints them.
var FaultKinds = []string{FaultFreeze, FaultCut, FaultKill, FaultRestartEmpty, FaultScriptFlush, FaultSlotMove, FaultSluiceKill, FaultHomeDown}

// Fault is one injected fault, as the nemesis saw it.
type Fault struct {
	Kind   string
	Target string // the Redis node's address, the sluice process's name, or "home"
	// Slots are the hash slots the fault touches (the node's, when it
	// began; the moved slot, for a slot move); nil: every key's.
	Slots [][2]int
	// From and To bound the fault: from the first step of injecting it to
	// the moment it was healed and the store answered again. To is zero
	// while it lasts (Check treats it as lasting).
	From, To time.Time
	// HeldBack, for a kill, is when the replica stopped receiving the
	// primary's stream (zero: it was not held back); the spends of
	// durability: none policies admitted from then to From are those the
	// promoted replica may lack.
	HeldBack time.Time
}

// FaultLog is every fault of a run. It is safe for concurrent use.
type FaultLog struct {
	mu     sync.Mutex
	faults []*Fault
}

// Begin records that f started; End it with End.
func (l *FaultLog) Begin(f Fault) *Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := &f
	l.faults = append(l.faults, p)
	return p
}

// End records that f was healed at at.
func (l *FaultLog) End(f *Fault, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.To = at
}

// All returns a copy of every fault so far.
func (l *FaultLog) All() []Fault {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Fault, len(l.faults))
	for i, f := range l.faults {
		out[i] = *f
	}
	return out
}

// The settle time of each kind: how long its effects may outlast the
// moment it was healed (Fault.To). A fault's window is [From, To + settle];
// its own allowance (below) counts for every interval that window
// overlaps, and an excess in such an interval is attributed to it.
// docs/reliability.md ("Bounds under faults") says why each is what it is.
const (
	// SettleFreeze: the node's breaker may have opened during the freeze;
	// it stays open for its cool-down (1 s, cluster/breaker.go) after the
	// node answers again, then one probe closes it; plus two timeouts
	// (50 ms) for requests in flight, and margin for a loaded machine.
	SettleFreeze = 1500 * time.Millisecond
	// SettleCut: as for a freeze (the breaker's cool-down and its probe).
	SettleCut = 1500 * time.Millisecond
	// SettleKill: To is when the promoted replica answers; sluice reloads
	// its slot map about 1 s after a failure, and a request sent to the
	// dead address meanwhile meets its breaker (1 s cool-down).
	SettleKill = 2 * time.Second
	// SettleRestartEmpty: the node answers NOSCRIPT once (reloaded at
	// once) and its breaker may be open for its cool-down, with the slot
	// map's reload beside it.
	SettleRestartEmpty = 2 * time.Second
	// SettleScriptFlush: NOSCRIPT is retried with EVAL in the same call;
	// nothing outlasts the flush but the calls in flight.
	SettleScriptFlush = 500 * time.Millisecond
	// SettleSlotMove: a request still bouncing between MOVED replies
	// reloads the slot map (about 1 s after a sign of change).
	SettleSlotMove = time.Second
	// SettleSluiceKill: the restarted process's leases are gone (an
	// under-admission), the other's run out within 1.5 lease TTLs
	// (150 ms); its new local buckets start full, which its own share
	// check allows (one burst per restart).
	SettleSluiceKill = time.Second
	// SettleHomeDown: once home answers, the floor's admissions are
	// debited at the first claim, within one allocation round; pools
	// refill within the allocator's horizon (two rounds, 0.2 s).
	SettleHomeDown = time.Second
	// ReplicationLag (λ) is the replication lag a kill's bound assumes
	// when the nemesis did not hold the stream back: on loopback a
	// replica gets a write within the primary's event-loop iteration
	// (well under 1 ms); 100 ms covers a replica starved of CPU on a
	// loaded machine. It is an assumption, not a guarantee (Redis
	// replicates asynchronously, with no upper bound): a longer natural
	// lag shows as a violation, and that is a finding to explain.
	ReplicationLag = 100 * time.Millisecond
)

// Settle returns the settle time of a fault kind (0 for an unknown one).
func Settle(kind string) time.Duration {
	switch kind {
	case FaultFreeze:
		return SettleFreeze
	case FaultCut:
		return SettleCut
	case FaultKill:
		return SettleKill
	case FaultRestartEmpty:
		return SettleRestartEmpty
	case FaultScriptFlush:
		return SettleScriptFlush
	case FaultSlotMove:
		return SettleSlotMove
	case FaultSluiceKill:
		return SettleSluiceKill
	case FaultHomeDown:
		return SettleHomeDown
	}
	return 0
}

// The kinds of an Excess that is no fault's.
const (
	ExcessFallback = "fallback" // open and local fallback (or overload) admissions outside every fault window
	ExcessRegion   = "region"   // a global key's floor outside every home-down window (a key new to an instance)
)

// Excess is one key's admissions past its fault-free bound, attributed to
// the fault (or fallback) that allows it.
type Excess struct {
	Key    string
	Policy string
	Kind   string // a fault kind, or "fallback" for fallback admissions outside every fault window, "region" for a floor's
	Fault  int    // index into the faults given to Check; -1 for none
	Tokens float64
	Bound  float64 // what the kind's formula allowed this key in that interval
	// Durability is the policy's (none, replica) in that interval:
	// replica only when every variant in force had it. The report splits
	// kills by it.
	Durability string
	// Store is the part of Tokens admitted by the store's own paths
	// (store, lease, split, region) past the fault-free bound: what the
	// store forgot (a kill's lost spends, a restart's fresh bucket). The
	// rest is the fallback's and the floor's.
	Store float64
	// From and To are the interval of the largest excess.
	From, To time.Time
}

// nodeFault reports whether kind is a fault of one Redis node.
func nodeFault(kind string) bool {
	switch kind {
	case FaultFreeze, FaultCut, FaultKill, FaultRestartEmpty, FaultScriptFlush, FaultSlotMove:
		return true
	}
	return false
}

// keyFault is one fault that touches a key, with what it allows it.
type keyFault struct {
	i     int // index into Check's faults
	f     Fault
	until time.Time // To + settle; far in the future while it lasts
	lost  float64   // a kill: the store-decided spends a promoted replica may lack
}

// farFuture stands for "still lasting".
var farFuture = time.Unix(1<<40, 0)

// touches reports whether f may touch k's state: a node fault when the
// key's slots meet the fault's (or either is unknown), a sluice kill
// every key, a home store down only global keys.
func touches(f Fault, k *KeyLog, global bool) bool {
	switch {
	case f.Kind == FaultSluiceKill:
		return true
	case f.Kind == FaultHomeDown:
		return global
	case !nodeFault(f.Kind):
		return false
	case k.Slots == nil || f.Slots == nil:
		return true
	}
	for _, s := range k.Slots {
		for _, r := range f.Slots {
			if s >= r[0] && s <= r[1] {
				return true
			}
		}
	}
	return false
}

// touching returns the faults that touch k, each with its window and,
// for a kill, its lost spends: the store-decided admissions of k whose
// [Sent, Recv] meets [HeldBack − λ, From + λ] (HeldBack zero: From − λ;
// the SIGKILL lands within λ of From). A leased admission counts when it
// meets that window widened by sl.Lease (its claim, the spend, was up to
// that long before it); a fallback admission spent nothing in the store.
func touching(k *KeyLog, spans []Span, faults []Fault, sl Slack) []keyFault {
	global := false
	for _, s := range spans {
		global = global || s.V.Global
	}
	var out []keyFault
	for i, f := range faults {
		if !touches(f, k, global) {
			continue
		}
		kf := keyFault{i: i, f: f, until: farFuture}
		if !f.To.IsZero() {
			kf.until = f.To.Add(Settle(f.Kind))
		}
		if f.Kind == FaultKill {
			from := f.From.Add(-ReplicationLag)
			if !f.HeldBack.IsZero() {
				from = f.HeldBack.Add(-ReplicationLag)
			}
			to := f.From.Add(ReplicationLag)
			for _, x := range k.Adm {
				if pathOf(x.By) != pathStore {
					continue
				}
				end := to
				if x.By == "lease" {
					end = end.Add(sl.Lease)
				}
				if !x.Recv.Before(from) && !x.Sent.After(end) {
					kf.lost += float64(x.Cost)
				}
			}
		}
		out = append(out, kf)
	}
	return out
}

// own is what fault kf allows a key past its bound, by itself, over an
// interval [a, b] under the variants ss: nothing unless its window [From,
// To + settle] overlaps the interval; then a kill, the lost spends (none
// for a durability: replica policy: such a spend was answered only once a
// replica had it); a restart empty, one limit (the largest in force: the
// bucket or window restarts full); every other kind nothing (its
// fallback decisions have allowances of their own).
func (kf keyFault) own(ss []Span, a, b time.Time) (float64, bool) {
	if kf.f.From.After(b) || kf.until.Before(a) {
		return 0, false
	}
	switch kf.f.Kind {
	case FaultKill:
		lost := kf.lost
		if durability(ss) == "replica" {
			lost = 0
		}
		return lost + splitMoved(ss), true
	case FaultRestartEmpty:
		var L int64
		for _, s := range ss {
			L = max(L, s.V.Limit)
		}
		return float64(L), true
	}
	return 0, true
}

// durability is replica when every variant of ss has durability: replica,
// else none.
func durability(ss []Span) string {
	for _, s := range ss {
		if s.V.Durability != "replica" {
			return "none"
		}
	}
	if len(ss) == 0 {
		return "none"
	}
	return "replica"
}

// allowed sums the own allowances of the faults of fs over [a, b] and
// names the one an excess is attributed to: the largest own allowance; on
// a tie the first in rank's order, then the earliest; -1 when no fault
// window overlaps. floorOnly: the interval has no fallback admission (an
// excess there is a floor's or the store's).
func allowed(fs []keyFault, ss []Span, a, b time.Time, floorOnly bool) (sum float64, to int) {
	to, best, bestRank := -1, -1.0, 0
	for j, kf := range fs {
		n, ok := kf.own(ss, a, b)
		if !ok {
			continue
		}
		sum += n
		r := rank(kf.f.Kind, floorOnly)
		if n > best || n == best && r < bestRank {
			to, best, bestRank = j, n, r
		}
	}
	return sum, to
}

// rank orders the kinds for a tie of own allowances: those that lose a
// key's state, then those that send its requests to the fallback, then
// the home store (first where the excess can only be a floor's), a sluice
// kill last (it touches every key and sends none of the other instance's
// requests to a fallback).
func rank(kind string, floorOnly bool) int {
	if kind == FaultHomeDown && floorOnly {
		return -1
	}
	switch kind {
	case FaultKill:
		return 0
	case FaultRestartEmpty:
		return 1
	case FaultFreeze:
		return 2
	case FaultCut:
		return 3
	case FaultSlotMove:
		return 4
	case FaultScriptFlush:
		return 5
	case FaultHomeDown:
		return 6
	}
	return 7
}

// tally sums one interval's admissions by path.
type tally struct{ all, store, open, local int64 }

func (t *tally) add(x Admission) {
	t.all += x.Cost
	switch pathOf(x.By) {
	case pathOpen:
		t.open += x.Cost
	case pathLocal:
		t.local += x.Cost
	case pathStore:
		t.store += x.Cost
	}
}

// book records an interval's excess over the fault-free bound (base),
// where the store's own paths kept within it plus the faults' own
// allowances: attributed to the fault whose own allowance is the largest
// (the earliest on a tie), else to the fallback, else to a region floor.
// Its bound is the whole allowance: the open admissions, N local shares
// (fallback, when a local bucket may decide), the floor and every
// overlapping fault's own.
func (c *checker) book(t tally, base, fallback, floor, own float64, to int, durab string, a, b time.Time) {
	e := float64(t.all) - base
	if e <= 1e-9 {
		return
	}
	x := Excess{Key: c.k.Key, Policy: c.k.Policy, Fault: -1, Tokens: e, Bound: float64(t.open) + fallback + floor + own,
		Durability: durab, Store: math.Max(0, float64(t.store)-base), From: a, To: b}
	switch {
	case to >= 0:
		x.Fault, x.Kind = c.fs[to].i, c.fs[to].f.Kind
	case t.open+t.local > 0:
		x.Kind = ExcessFallback
	default:
		x.Kind = ExcessRegion
	}
	c.excess.add(x)
}

// excessBook keeps the worst excess per key and attribution.
type excessBook map[[2]string]Excess

func (eb excessBook) add(e Excess) {
	id := [2]string{strconv.Itoa(e.Fault), e.Kind}
	if old, ok := eb[id]; !ok || e.Tokens > old.Tokens {
		eb[id] = e
	}
}

func (eb excessBook) list() []Excess {
	out := make([]Excess, 0, len(eb))
	for _, e := range eb {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Fault != out[j].Fault {
			return out[i].Fault < out[j].Fault
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// row is one line of FaultTable: a fault kind, a kill split by durability.
func (e Excess) row() string {
	if e.Kind == FaultKill {
		if e.Durability == "replica" {
			return "kill (durability replica)"
		}
		return "kill (durability none)"
	}
	return e.Kind
}

// FaultTable is the run's fault report, one Markdown row per fault kind
// (a kill split by the policies' durability): how many were injected, the
// keys with an excess, the largest excess in tokens and as a share of its
// bound, and the largest part of an excess the store's own paths admitted
// (what the store forgot). Excesses outside every fault window have rows
// of their own (fallback, region floor) when there are any. Both rows of a
// kill count every kill injected: one kill touches keys of either
// durability.
func FaultTable(faults []Fault, excess []Excess) string {
	injected := map[string]int{}
	for _, f := range faults {
		if f.Kind == FaultKill {
			injected["kill (durability none)"]++
			injected["kill (durability replica)"]++
			continue
		}
		injected[f.Kind]++
	}
	var rows []string
	for _, k := range FaultKinds {
		if k == FaultKill {
			rows = append(rows, "kill (durability none)", "kill (durability replica)")
			continue
		}
		rows = append(rows, k)
	}
	type agg struct {
		keys  map[string]bool
		worst *Excess
		store float64
	}
	by := map[string]*agg{}
	for _, e := range excess {
		r := e.row()
		g := by[r]
		if g == nil {
			g = &agg{keys: map[string]bool{}}
			by[r] = g
		}
		g.keys[e.Key] = true
		if g.worst == nil || e.Tokens > g.worst.Tokens {
			e := e
			g.worst = &e
		}
		g.store = math.Max(g.store, e.Store)
	}
	for _, extra := range []string{ExcessFallback, ExcessRegion} {
		if by[extra] != nil {
			rows = append(rows, extra)
		}
	}
	var b strings.Builder
	b.WriteString("| fault | injected | keys with an excess | largest excess (share of its bound) | of it by the store |\n")
	b.WriteString("|---|--:|--:|---|--:|\n")
	for _, r := range rows {
		n := "—"
		if r != ExcessFallback && r != ExcessRegion {
			n = strconv.Itoa(injected[r])
		}
		name := r
		switch r {
		case ExcessFallback:
			name = "fallback (outside every fault)"
		case ExcessRegion:
			name = "region floor (outside every home-down)"
		}
		g := by[r]
		if g == nil {
			fmt.Fprintf(&b, "| %s | %s | 0 | 0 | 0 |\n", name, n)
			continue
		}
		w := g.worst
		share := 0.0
		if w.Bound > 0 {
			share = w.Tokens / w.Bound
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s tokens (%.2f of %s) | %s |\n", name, n, len(g.keys), num(w.Tokens), share, num(w.Bound), num(g.store))
	}
	return b.String()
}

// num prints x with at most two decimals, and none when it is whole.
func num(x float64) string {
	return strconv.FormatFloat(math.Round(x*100)/100, 'f', -1, 64)
}

// forgottenByKill reports whether a kill of fs lost prev, a give-back of
// the key applied within the kill's replication lag ([HeldBack − λ, From +
// λ], as its lost spends), before g was sent after the kill.
func forgottenByKill(fs []keyFault, prev, g GiveBack) bool {
	for _, kf := range fs {
		if kf.f.Kind != FaultKill {
			continue
		}
		from := kf.f.From.Add(-ReplicationLag)
		if !kf.f.HeldBack.IsZero() {
			from = kf.f.HeldBack.Add(-ReplicationLag)
		}
		if !prev.Recv.Before(from) && !prev.Sent.After(kf.f.From.Add(ReplicationLag)) && g.Sent.After(kf.f.From) {
			return true
		}
	}
	return false
}

// splitMoved is what a kill may let a split key admit on top of its lost
// spends: the budget the main bucket moved to its sub-buckets (on other
// nodes) within the kill's replication lag. The promoted replica's main
// bucket never lost it, so it may be moved, and admitted, once more; at
// most what the main bucket holds, one limit (the largest in force). 0
// unless a split variant is in force.
func splitMoved(ss []Span) float64 {
	var L int64
	for _, s := range ss {
		if s.V.Hot == "split" {
			L = max(L, s.V.Limit)
		}
	}
	return float64(L)
}
