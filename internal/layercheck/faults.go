package layercheck

import (
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

// Excess is one key's admissions past its fault-free bound, attributed to
// the fault (or fallback) that allows it.
type Excess struct {
	Key    string
	Policy string
	Kind   string // a fault kind, or "fallback" for fallback admissions outside every fault window
	Fault  int    // index into the faults given to Check; -1 for none
	Tokens float64
	Bound  float64 // what the kind's formula allowed this key in that interval
}

// FaultTable is the run's fault report, one Markdown row per fault kind
// (a kill split by the policies' durability): how many were injected, the
// keys with an excess, the largest excess in tokens and as a share of its
// bound.
func FaultTable(faults []Fault, excess []Excess) string {
	return "" // issue 29: written with the bounds
}
