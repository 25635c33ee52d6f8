package layercheck

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Variant is one set of numbers a policy had: what bounds its keys while it
// is in force. The zero value is no policy.
type Variant struct {
	Name      string
	Algorithm string // token_bucket | gcra | sliding_window | fixed_window
	Limit     int64
	Rate      int64         // per Period; bucket algorithms only
	Period    time.Duration // refill period or window length
	Global    bool          // scope: global (decided from a region's pool)
	Floor     float64       // region_floor of a global policy
	Hot       string        // "", lease or split
	Shadow    bool
	// Calendar (day, week, month, year) makes a fixed_window's windows
	// Zone's calendar ones instead of Period-long ones from the epoch.
	Calendar string
	Zone     *time.Location
	// What its keys do when the store cannot answer (issue 29's bounds):
	// on_store_error (open, closed, local), local_share, durability
	// (none, replica).
	OnStoreError string
	LocalShare   float64
	Durability   string
}

// Bucket reports whether v is a bucket algorithm (token_bucket, gcra).
func (v Variant) Bucket() bool { return v.Algorithm == "token_bucket" || v.Algorithm == "gcra" }

func (v Variant) String() string {
	s := fmt.Sprintf("%s(%s %d", v.Name, v.Algorithm, v.Limit)
	if v.Bucket() {
		s += fmt.Sprintf("+%d", v.Rate)
	}
	s += "/" + v.Period.String()
	if v.Global {
		s += " global"
	}
	if v.Hot != "" {
		s += " hot=" + v.Hot
	}
	return s + ")"
}

// bucketForm is v as a bound on any interval: burst b plus r per second.
// A window policy admits at most limit in each window an interval touches,
// so over T it admits at most limit × (T/P + 2).
func (v Variant) bucketForm() (b, r float64) {
	p := v.Period.Seconds()
	if v.Bucket() {
		return float64(v.Limit), float64(v.Rate) / p
	}
	return 2 * float64(v.Limit), float64(v.Limit) / p
}

// Span is a time a variant was (possibly) in force on some instance: from
// the moment the change that made it was sent to the moment the change that
// ended it had reached every instance. To is zero while it is in force.
type Span struct {
	V        Variant
	From, To time.Time
}

func (s Span) overlaps(a, b time.Time) bool {
	return !s.From.After(b) && (s.To.IsZero() || !s.To.Before(a))
}

// Tracker records the spans of every policy name. It is safe for
// concurrent use.
type Tracker struct {
	mu    sync.Mutex
	spans map[string][]*Span
}

// NewTracker returns a tracker where vs are in force since at.
func NewTracker(at time.Time, vs ...Variant) *Tracker {
	t := &Tracker{spans: map[string][]*Span{}}
	for _, v := range vs {
		t.Open(v, at)
	}
	return t
}

// Open records that v may be in force from at (a no-op when it already is).
func (t *Tracker) Open(v Variant, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.spans[v.Name] {
		if s.V == v && s.To.IsZero() {
			return
		}
	}
	t.spans[v.Name] = append(t.spans[v.Name], &Span{V: v, From: at})
}

// Close records that v is in force nowhere after at.
func (t *Tracker) Close(v Variant, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.spans[v.Name] {
		if s.V == v && s.To.IsZero() {
			s.To = at
		}
	}
}

// Spans returns a copy of name's spans.
func (t *Tracker) Spans(name string) []Span {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Span, 0, len(t.spans[name]))
	for _, s := range t.spans[name] {
		out = append(out, *s)
	}
	return out
}

// Admission is one admitted take: the decision happened at some moment in
// [Sent, Recv].
type Admission struct {
	Sent, Recv time.Time
	Cost       int64
	By         string // decided_by, or the door's word when it has none
	Door       string // resp, mtake, http, grpc, cl
	Proc       string // the sluice process that answered (p1, p2): a fallback's share is per instance
}

// Interval is the time an operation was in flight.
type Interval struct{ Sent, Recv time.Time }

// KeyLog is what one user key saw: its admissions and resets. For
// CL.THROTTLE keys, Fixed is the call's own GCRA limit.
type KeyLog struct {
	Key    string
	Policy string   // the policy name the key's glob matches
	Fixed  *Variant // CL.THROTTLE: the parameters of every call
	Adm    []Admission
	Resets []Interval
	// Fallback are reasons the key cannot be checked (a reset the store
	// may or may not have done). Admissions decided by a fallback or the
	// overload path are in Adm, with their By.
	Fallback []string
	// Slots are the hash slots the key's state lives in; nil: unknown
	// (every node fault may touch it).
	Slots []int
	// Receipts are the receipts the key's admitted takes were answered
	// with (RL.TAKE key cost RECEIPT), by receipt. Only a receipt found
	// here can credit a give-back of this key, and only its taker's.
	Receipts map[string]Taken
	// Backs are the give-backs sent on the key (RL.ADJUST with a negative
	// delta), applied or refused, with the receipt each named; Check
	// credits the valid ones only (receipts.go). A positive delta only
	// spends: it needs no entry.
	Backs []GiveBack
}

// Slack are the documented imprecisions a check allows for.
type Slack struct {
	// Lease is how long a leased token may be held before it is admitted
	// (1.5 lease TTLs plus margin): an admission from a lease spent bucket
	// tokens up to that long before it.
	Lease time.Duration
	// Pool is the same for a region's pool of a global key (docs/architecture.md's
	// bound for regions): a pooled token was claimed from home up to the
	// allocator's horizon (two rounds) before it is admitted.
	Pool time.Duration
	// Reset: admissions that overlap [reset sent, reset recv + Reset] are
	// ambiguous (other instances' leases and in-flight region claims).
	Reset time.Duration
	// Instances is N, the sluice instances that may decide a key: the
	// local fallback's allowance is N local_share buckets. Zero: the
	// processes seen answering the key (at least 1).
	Instances int
}

// Violation is one interval in which a key admitted more than its bound.
type Violation struct {
	// Kind: bucket, window, region (the store's paths past the bound and
	// every fault's allowance), local-share (one instance's local bucket
	// past its share), fallback-mode (an admission no on_store_error in
	// force makes), receipt, permission.
	Key, Policy, Kind string
	From, To          time.Time
	Admitted          int64
	Bound             float64
	Variants          []string
	By                map[string]int
	// Note, for a violation that is no bound's (kinds receipt and
	// permission: a command the contract refuses was answered as done),
	// says what was done; Admitted is then its tokens.
	Note string
}

func (v Violation) String() string {
	var by []string
	for k, n := range v.By {
		by = append(by, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(by)
	if v.Note != "" {
		return fmt.Sprintf("key %q (policy %s) %s check: %s, in [%s, %s]; decided_by %s",
			v.Key, v.Policy, v.Kind, v.Note, v.From.Format("15:04:05.000"), v.To.Format("15:04:05.000"), strings.Join(by, ","))
	}
	return fmt.Sprintf("key %q (policy %s) %s check: admitted %d in [%s, %s] (%.3fs), bound %.2f under %s; decided_by %s",
		v.Key, v.Policy, v.Kind, v.Admitted, v.From.Format("15:04:05.000"), v.To.Format("15:04:05.000"),
		v.To.Sub(v.From).Seconds(), v.Bound, strings.Join(v.Variants, " | "), strings.Join(by, ","))
}

// RegionExcess is an interval where a global key admitted more than
// limit + rate × T but within the floor's own limit + rate × T on top.
type RegionExcess struct {
	Key      string
	Admitted int64
	Bound    float64
	Seconds  float64
}

// Result is what Check found for one key.
type Result struct {
	Violations []Violation
	Region     []RegionExcess
	Checked    bool // false: the key is inconclusive (KeyLog.Fallback: a reset the store may or may not have done)
	// Excess are the admissions past the fault-free bound that a fault's
	// (or a fallback's) written bound allows: the worst interval per
	// fault (per kind for those outside every fault window).
	Excess []Excess
	// Refused are the give-backs answered as applied that the contract
	// refuses (no receipt, one of no admitted take on this key, one used
	// already, a delta above its take's cost): a refused command must
	// change nothing, so each is a violation of its own (kind receipt).
	Refused []GiveBack
}

// Check checks one key against the spans of its policy (spans is ignored
// for a Fixed key) and the faults of the run.
func Check(k *KeyLog, spans []Span, sl Slack, faults []Fault) Result {
	if len(k.Fallback) > 0 {
		return Result{}
	}
	if k.Fixed != nil {
		spans = []Span{{V: *k.Fixed}}
	}
	var res Result
	res.Checked = true
	fs := touching(k, spans, faults, sl)
	back, refused := credited(k, func(prev, g GiveBack) bool { return forgottenByKill(fs, prev, g) })
	res.Refused = refused
	for _, g := range refused {
		res.Violations = append(res.Violations, Violation{Key: k.Key, Policy: k.Policy, Kind: "receipt", From: g.Sent, To: g.Recv,
			Admitted: g.Delta, Note: g.why(k), By: map[string]int{"adjust/" + g.By: 1}})
	}
	c := checker{k: k, spans: spans, sl: sl, back: back, fs: fs, n: instances(k, sl), excess: excessBook{}}
	for _, seg := range segments(k, spans, sl) {
		checkModes(k, seg, spans, &res)
		c.buckets(seg, &res)
		c.windows(seg, &res)
		checkShares(k, seg, spans, c.fs, &res)
	}
	res.Excess = c.excess.list()
	return res
}

// checker is what Check's interval loops share for one key.
type checker struct {
	k      *KeyLog
	spans  []Span
	sl     Slack
	back   []Admission // the credited give-backs
	fs     []keyFault  // the faults that touch the key
	n      int         // instances
	excess excessBook
}

// segments splits the admissions at each reset, dropping those that
// overlap one.
func segments(k *KeyLog, spans []Span, sl Slack) [][]Admission {
	slack := time.Duration(0)
	for _, s := range spans {
		if s.V.Hot != "" || s.V.Global {
			slack = sl.Reset
		}
	}
	resets := slices.Clone(k.Resets)
	sort.Slice(resets, func(i, j int) bool { return resets[i].Sent.Before(resets[j].Sent) })
	segs := make([][]Admission, len(resets)+1)
next:
	for _, a := range k.Adm {
		n := 0
		for _, r := range resets {
			if !a.Recv.Before(r.Sent) && !a.Sent.After(r.Recv.Add(slack)) {
				continue next // ambiguous
			}
			if a.Sent.After(r.Recv) {
				n++
			}
		}
		segs[n] = append(segs[n], a)
	}
	return segs
}

// in returns the spans overlapping [a, b].
func in(spans []Span, a, b time.Time) []Span {
	var out []Span
	for _, s := range spans {
		if s.overlaps(a, b) {
			out = append(out, s)
		}
	}
	return out
}

func names(spans []Span) []string {
	var out []string
	for _, s := range spans {
		if n := s.V.String(); !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

func byCount(adm []Admission, a, b time.Time) map[string]int {
	m := map[string]int{}
	for _, x := range adm {
		if !x.Sent.Before(a) && !x.Recv.After(b) {
			m[x.Door+"/"+x.By]++
		}
	}
	return m
}

// windowsOnly reports whether every span is a window policy of one kind
// of windows (one period, or one calendar in one zone), and that kind.
func windowsOnly(spans []Span) (windowKind, bool) {
	var k windowKind
	for _, s := range spans {
		if s.V.Bucket() || (k != windowKind{} && s.V.kind() != k) {
			return windowKind{}, false
		}
		k = s.V.kind()
	}
	return k, k != windowKind{}
}

// buckets checks every interval [Sent_i, Recv_j]: the admissions that
// lie wholly inside it happened within its length, which is the longest
// the real interval between them can be, so the bound used is the largest
// the truth allows (never a false violation from timing). The store's own
// paths (every admission but the fallback's and overload's) must keep
// within the fault-free bound plus the own allowances of the faults whose
// windows overlap the interval (and, for a global key, its floor); the
// local ones are checked per instance (checkShares), the open ones are
// their own allowance. It is skipped where only window policies of one
// period were in force: windows is exact there.
func (c *checker) buckets(adm []Admission, res *Result) {
	if len(adm) == 0 {
		return
	}
	k, spans, sl := c.k, c.spans, c.sl
	worst := map[string]Violation{} // one per kind: the largest excess
	excess := map[string]float64{}
	var regionExcess *RegionExcess
	for a, sentFrom := range intervals(adm) {
		var t tally
		for x := range sentFrom {
			t.add(x)
			b := x.Recv
			ss := in(spans, a, b)
			if len(ss) == 0 {
				continue
			}
			if _, ok := windowsOnly(ss); ok {
				continue
			}
			T := b.Sub(a).Seconds()
			bound, floor := bucketBound(ss, T, sl)
			bound += givenBack(c.back, a, b)
			if float64(t.all) <= bound {
				continue // nothing past the fault-free bound: no excess, no violation
			}
			own, to := allowed(c.fs, ss, a, b, t.open+t.local == 0)
			sum := float64(t.store)
			if sum <= bound+own+floor {
				if floor > 0 && sum > bound+own && (regionExcess == nil || sum-bound > float64(regionExcess.Admitted)-regionExcess.Bound) {
					regionExcess = &RegionExcess{Key: k.Key, Admitted: t.store, Bound: bound, Seconds: T}
				}
				fb := 0.0
				if t.local > 0 || localMay(ss) {
					sb, burst := shareBound(ss, T)
					fb = float64(c.n)*sb + burst*float64(restarts(c.fs, "", a, b))
				}
				c.book(t, bound, fb, floor, own, to, durability(ss), a, b)
				continue
			}
			kind := "bucket"
			bound += own
			if floor > 0 {
				kind, bound = "region", bound+floor
			}
			if e := sum - bound; e > excess[kind] {
				excess[kind] = e
				worst[kind] = Violation{Key: k.Key, Policy: k.Policy, Kind: kind, From: a, To: b, Admitted: t.store, Bound: bound,
					Variants: names(ss), By: byCount(adm, a, b)}
			}
		}
	}
	for _, kind := range []string{"bucket", "region"} {
		if v, ok := worst[kind]; ok {
			res.Violations = append(res.Violations, v)
		}
	}
	if regionExcess != nil {
		res.Region = append(res.Region, *regionExcess)
	}
}

// intervals are the intervals [a, b] of adm that a bound over time is
// checked on: a the Sent of an admission, each once, earliest first, with
// sentFrom the admissions sent at or after a in the order they were
// received, each x closing the interval [a, x.Recv]. adm is sorted once,
// when intervals is called.
func intervals(adm []Admission) iter.Seq2[time.Time, iter.Seq[Admission]] {
	bySent := slices.Clone(adm)
	sort.Slice(bySent, func(i, j int) bool { return bySent[i].Sent.Before(bySent[j].Sent) })
	byRecv := slices.Clone(adm)
	sort.Slice(byRecv, func(i, j int) bool { return byRecv[i].Recv.Before(byRecv[j].Recv) })
	return func(yield func(time.Time, iter.Seq[Admission]) bool) {
		for i, first := range bySent {
			if i > 0 && bySent[i-1].Sent.Equal(first.Sent) {
				continue
			}
			a := first.Sent
			sentFrom := func(yield func(Admission) bool) {
				for _, x := range byRecv {
					if !x.Sent.Before(a) && !yield(x) {
						return
					}
				}
			}
			if !yield(a, sentFrom) {
				return
			}
		}
	}
}

// bucketBound is the most the variants ss allow over an interval of
// seconds: the largest burst plus the largest rate times the interval,
// widened by sl.Lease where a lease was in force and by sl.Pool where a
// pool was; and the regional floor over the same interval, the largest
// floor burst plus the largest floor rate times it (0 where no variant is
// global).
func bucketBound(ss []Span, seconds float64, sl Slack) (bound, floor float64) {
	T := seconds
	var B, R, fB, fR float64
	lease, pooled := false, false
	for _, s := range ss {
		bb, rr := s.V.bucketForm()
		B, R = math.Max(B, bb), math.Max(R, rr)
		if s.V.Hot == "lease" {
			lease = true
		}
		if s.V.Global {
			pooled = true
			f := s.V.Floor
			fB = math.Max(fB, math.Max(1, math.Floor(float64(s.V.Limit)*f)))
			fR = math.Max(fR, math.Max(1, math.Floor(float64(s.V.Rate)*f))/s.V.Period.Seconds())
		}
	}
	if lease {
		T += sl.Lease.Seconds()
	}
	if pooled {
		T += sl.Pool.Seconds()
	}
	if fB > 0 {
		floor = fB + fR*T
	}
	return B + R*T + 1e-9, floor
}

// windows counts, in each window (epoch-aligned, or a calendar's), the
// admissions whose whole [Sent, Recv] lies inside it (those certainly
// decided in it), and compares those of the store's own paths with the
// largest limit in force during the window, where only window policies of
// that kind of windows were, plus the receipts given back into it and the
// own allowances of the faults whose windows overlap it.
func (c *checker) windows(adm []Admission, res *Result) {
	k, spans := c.k, c.spans
	type win struct {
		start, end time.Time
		kind       windowKind
	}
	counts := map[win]*tally{}
	for _, x := range adm {
		ss := in(spans, x.Sent, x.Recv)
		kind, ok := windowsOnly(ss)
		if !ok {
			continue
		}
		start, end := ss[0].V.windowAt(x.Sent)
		if x.Recv.Before(end) {
			w := win{start, end, kind}
			if counts[w] == nil {
				counts[w] = &tally{}
			}
			counts[w].add(x)
		}
	}
	var worst *Violation
	for w, t := range counts {
		ss := in(spans, w.start, w.end.Add(-1))
		kind, ok := windowsOnly(ss)
		if !ok || kind != w.kind {
			continue
		}
		var L int64
		for _, s := range ss {
			L = max(L, s.V.Limit)
		}
		L += int64(givenBack(c.back, w.start, w.end))
		own, to := allowed(c.fs, ss, w.start, w.end.Add(-1), t.open+t.local == 0)
		n := t.store
		if float64(n) <= float64(L)+own {
			fb := 0.0
			if t.local > 0 || localMay(ss) {
				fb = float64((c.n + restarts(c.fs, "", w.start, w.end)) * int(shareLimit(ss)))
			}
			c.book(*t, float64(L), fb, 0, own, to, durability(ss), w.start, w.end)
			continue
		}
		bound := float64(L) + own
		if worst == nil || float64(n)-bound > float64(worst.Admitted)-worst.Bound {
			worst = &Violation{Key: k.Key, Policy: k.Policy, Kind: "window", From: w.start, To: w.end,
				Admitted: n, Bound: bound, Variants: names(ss), By: byCount(adm, w.start, w.end)}
		}
	}
	if worst != nil {
		res.Violations = append(res.Violations, *worst)
	}
}
