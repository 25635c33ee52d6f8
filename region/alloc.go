package region

import (
	"context"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// entry is one global key this instance has seen. The request path writes
// its atomics; the rest belongs to the allocator's goroutine.
type entry struct {
	key         string
	p           atomic.Pointer[limit.Policy]
	asked       atomic.Int64 // tokens asked for (admitted or not) since the allocator last looked
	lastAsk     atomic.Int64 // ns of the last take
	pool        atomic.Int64 // the region's pool as last seen, tokens
	floorTaken  atomic.Int64 // admitted by the floor, not yet debited at home
	established atomic.Bool  // a claim for the key was answered
	debited     atomic.Bool  // what its regional bucket spent is owed (see Layer.debitRegional): it may be claimed for
	regional    atomic.Bool  // its policy stopped being global, and its regional bucket was emptied (see Layer.scopeChanged)
	retired     atomic.Bool  // nothing more is claimed for it: its pool went back home, or it is a marker of a scope change (scope.go)
	until       atomic.Int64 // ns: a retired entry whose bucket was emptied stays, as the marker that it was, until then
	claimed     atomic.Int64 // tokens claimed from home by this instance
	returned    atomic.Int64 // tokens given back to home by this instance
	demandBits  atomic.Uint64

	// the allocator's own
	demand    float64 // tokens/s asked of this instance, smoothed
	credit    float64 // tokens this instance may still claim under contention
	lastClaim int64   // ns
	board     board   // what the last exchange read
	fills     [fillsKept]fill
	nfill     int
}

// board is a key's demand board as last read.
type board struct {
	total, region float64  // tokens/s of every instance, of this region's others
	pools         int64    // what the other regions' pools hold, by their boards
	stale         []string // fields not written for boardStale, to delete
	read          bool
}

// Stale board fields (instances that stopped, or cut off from home) are
// ignored after boardStale and deleted: the others then claim the whole
// budget among themselves (ten rounds at the default tick; a cut-off
// region's floor admissions are debited when it is back). A board nobody
// writes expires after boardTTL.
const (
	boardStale = time.Second
	boardTTL   = 30 * time.Second
	// quietAfter: an instance that has seen no take of a key for this long,
	// in a region whose board shows no demand, gives the pool back; the
	// key is forgotten after forgetAfter once nothing is left to settle.
	quietAfter  = 3 * time.Second
	forgetAfter = 30 * time.Second
	// demandTau is the time constant of the demand average: a shift of
	// load shows in about three of them.
	demandTau = 500 * time.Millisecond
)

// entry returns key's entry, made on first sight, or nil past MaxKeys.
func (l *Layer) entry(key string, p *limit.Policy) *entry {
	for {
		v, ok := l.keys.Load(key)
		if !ok {
			break
		}
		e := v.(*entry)
		if !e.retired.Load() && !e.regional.Load() {
			if e.p.Load() != p {
				e.p.Store(p)
			}
			return e
		}
		// The key was decided as regional (its policy stopped being
		// global) and is global again: a new entry, which owes home what
		// the regional bucket spent meanwhile, and whose regional bucket
		// is emptied again at the next change.
		fresh := &entry{key: key}
		fresh.p.Store(p)
		if l.keys.CompareAndSwap(key, e, fresh) {
			go l.debitRegional(fresh, p)
			return fresh
		}
	}
	if l.nkeys.Load() >= l.maxKeys {
		l.st.untracked.Add(1)
		return nil
	}
	e := &entry{key: key}
	e.p.Store(p)
	if v, loaded := l.keys.LoadOrStore(key, e); loaded {
		return v.(*entry)
	}
	l.nkeys.Add(1)
	go l.debitRegional(e, p) // off the request's path; the floor decides until it is done
	return e
}

// demanded counts what r, decided as res, asks of e's allocation: a
// take is demand, admitted or not (true demand), when its pool could ever
// pay it (cost <= limit); an RL.MTAKE refund (OpReturn through the layer)
// takes back the demand of the take it undoes. A cost above the limit,
// or a take refunded, spends nothing: counted, it made the allocator claim
// for a demand nothing spent, and the pool's tokens stayed beside home's
// bucket while it refilled (issue 28 §3k: 15 admitted in 0.1 s against
// 11.70, TestUnpayableDemandFillsNoPool).
func (e *entry) demanded(r *limit.Request, p *limit.Policy, res *limit.Result, ns int64) {
	switch {
	case r.Op == limit.OpTake && r.Cost > 0 && r.Cost <= p.Limit:
		e.asked.Add(r.Cost)
		e.lastAsk.Store(ns)
	case r.Op == limit.OpReturn && r.Cost > 0 && res.Err == nil:
		e.asked.Add(-r.Cost)
	}
}

func (l *Layer) run() {
	defer l.wg.Done()
	t := time.NewTicker(l.tick)
	defer t.Stop()
	last := l.now()
	for {
		select {
		case <-l.done:
			l.drainAll()
			return
		case <-t.C:
		case <-l.kick:
		}
		now := l.now()
		l.round(now, now.Sub(last))
		last = now
	}
}

// round is one pass of the allocator: it updates every key's demand,
// claims from home what each key needs for the next horizon (within its
// share when the budget is contended) and debits what the floor admitted,
// exchanges demand with the other instances and regions on the boards,
// fills the pools with what was granted, and gives back the pools of keys
// that went quiet. Claims use the shares of the previous exchange, so the
// claims and the exchange travel to home together: one round trip.
func (l *Layer) round(now time.Time, dt time.Duration) {
	ns := now.UnixNano()
	l.noteSet()
	l.pruneChanges(ns)
	var es []*entry
	l.keys.Range(func(_, v any) bool {
		es = append(es, v.(*entry))
		return true
	})
	horizon := l.horizon()
	w := roundWork{horizon: horizon}
	for _, e := range es {
		l.plan(&w, e, ns, dt, horizon)
	}
	defer l.retire(w.retired)
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	if len(w.bkeys) == 0 && len(w.claims) == 0 {
		// nothing to say: still learn whether home answers, so that a key
		// that wakes up knows whether to wait for its allocation
		if err := l.home.Ping(ctx); err != nil {
			l.homeFailed()
		} else {
			l.homeAnswered(l.now())
		}
		return
	}
	l.exchange(ctx, now, &w)
	for _, e := range w.quiet {
		l.drain(e)
	}
}

// roundWork is what one round has to do at home: the claims, each with
// its entry and the floor debit it carries, the board fields to write
// with the stale ones to delete, and the keys to drain or retire after.
type roundWork struct {
	claims         []limit.Request
	claimOf        []*entry
	debits         []int64
	peeks          []limit.Request // home's bucket of keys whose pool holds tokens and that claim nothing (stale.go)
	peekOf         []*entry
	bkeys, bvals   []string
	bdrop          [][]string
	quiet, retired []*entry
	horizon        time.Duration
}

// claim adds a claim of cost tokens for e under p, debit of them owed for
// what the floor admitted.
func (w *roundWork) claim(e *entry, p *limit.Policy, cost, debit int64) {
	w.claims = append(w.claims, limit.Request{Key: e.key, Cost: cost, Op: limit.OpClaim, Policy: p})
	w.claimOf = append(w.claimOf, e)
	w.debits = append(w.debits, debit)
}

// plan adds e's part of the round to w: its claim and debit, its board
// field, whether it went quiet, or its retirement; or forgets it.
func (l *Layer) plan(w *roundWork, e *entry, ns int64, dt, horizon time.Duration) {
	if e.retired.Load() {
		w.retired = append(w.retired, e) // a marker: forgotten once its window ends
		return
	}
	p, global := l.policyOf(e)
	if !global {
		if debit := e.floorTaken.Swap(0); debit > 0 {
			w.claim(e, p, debit, debit)
		}
		w.retired = append(w.retired, e)
		return
	}
	e.updateDemand(float64(e.asked.Swap(0)), dt)
	if !e.debited.Load() {
		return // its first claim must carry what its regional bucket spent
	}
	idle := time.Duration(ns - e.lastAsk.Load())
	if idle > forgetAfter && e.pool.Load() == 0 && e.floorTaken.Load() == 0 {
		l.forget(e)
		return
	}
	if idle > quietAfter && e.board.read && e.board.region < 1e-3 && e.pool.Load() > 0 && l.HomeReachable(ns) {
		w.quiet = append(w.quiet, e)
	}
	ask := e.ask(p, ns, horizon)
	debit := e.floorTaken.Swap(0)
	if ask+debit > 0 {
		w.claim(e, p, ask+debit, debit)
	} else if e.pool.Load() > 0 {
		w.peeks = append(w.peeks, limit.Request{Key: e.key, Cost: 1, Op: limit.OpPeek, Policy: p})
		w.peekOf = append(w.peekOf, e)
	}
	if idle < quietAfter+boardStale || ask+debit > 0 || e.pool.Load() > 0 {
		// a key long quiet here and holding nothing stays off the
		// board: its field goes stale and the others stop counting it
		w.bkeys = append(w.bkeys, e.key)
		w.bvals = append(w.bvals, e.boardValue(ns))
		w.bdrop = append(w.bdrop, e.board.stale)
	}
}

// policyOf is e's policy now, and whether it is still global. A key whose
// policy is no longer global (RL.POLICY SET or DEL, a reload) is retired:
// nothing more is claimed for it, what the floor admitted is still debited
// (under the policy it was admitted by), its pool goes back home and it is
// forgotten (once its window ends, if its regional bucket was emptied:
// see scope.go). Before, the allocator kept claiming and filling its pool
// under the old policy.
func (l *Layer) policyOf(e *entry) (*limit.Policy, bool) {
	p := e.p.Load()
	if l.match == nil {
		return p, true
	}
	q := l.match(e.key)
	switch {
	case q == p:
		return p, true
	case q != nil && q.Global():
		e.p.Store(q)
		return q, true
	}
	return p, false
}

// exchange sends w's claims and board fields to home together, one round
// trip, then fills the pools with what was granted and reads the boards.
func (l *Layer) exchange(ctx context.Context, now time.Time, w *roundWork) {
	var wg sync.WaitGroup
	var boards []map[string]string
	var boardErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		boards, boardErr = l.home.Exchange(ctx, w.bkeys, l.field, w.bvals, w.bdrop, boardTTL)
		if boardErr == nil {
			l.observeRTT(time.Since(start))
		}
	}()
	asks := append(append([]limit.Request(nil), w.claims...), w.peeks...)
	answers := make([]limit.Result, len(asks))
	if len(asks) > 0 {
		l.home.Do(ctx, asks, answers)
	}
	granted, peeked := answers[:len(w.claims)], answers[len(w.claims):]
	wg.Wait()
	l.settle(ctx, now, w.claims, w.claimOf, w.debits, granted)
	if boardErr != nil {
		l.homeFailed()
		return
	}
	l.homeAnswered(l.now())
	l.readBoards(now.UnixNano(), w.bkeys, boards)
	l.trim(now.UnixNano(), w, granted, peeked)
}

// retire gives back the pools of keys whose policy stopped being global
// (their floor debits went with this round's claims), once, and forgets
// them: at once, or, for a key whose regional bucket this instance
// emptied, once the window of the scope change ends (the entry is the
// marker that it was emptied).
func (l *Layer) retire(es []*entry) {
	ns := l.now().UnixNano()
	for _, e := range es {
		if !e.retired.Swap(true) {
			l.drain(e)
			l.st.retired.Add(1)
		}
		if !e.regional.Load() || ns >= e.until.Load() {
			l.forget(e)
		}
	}
}

// forget drops e from the tracked keys, unless a new entry replaced it.
func (l *Layer) forget(e *entry) {
	if l.keys.CompareAndDelete(e.key, e) {
		l.nkeys.Add(-1)
	}
}

// horizon is how long the tokens a round claims must last: until the next
// round's claims arrive (a tick and a round trip), twice over, so that a
// burst above the smoothed demand or a late round does not find the pool
// empty while home has tokens to give. Under contention the credit, not
// the horizon, bounds a claim.
func (l *Layer) horizon() time.Duration {
	return 2 * (l.tick + time.Duration(l.rtt.Load()) + 20*time.Millisecond)
}

// updateDemand folds the tokens asked over dt into the smoothed demand.
func (e *entry) updateDemand(asked float64, dt time.Duration) {
	if dt <= 0 {
		return
	}
	a := 1 - math.Exp(-float64(dt)/float64(demandTau))
	if e.demand == 0 {
		a = 1 // a key's first demand is what it asks, not a fraction of it
	}
	e.demand = max(0, e.demand+a*(asked/dt.Seconds()-e.demand)) // asked < 0: refunds of takes counted before
	e.demandBits.Store(math.Float64bits(e.demand))
}

// Demand returns the key's smoothed demand on this instance, tokens/s.
func (e *entry) Demand() float64 { return math.Float64frombits(e.demandBits.Load()) }

// ask returns the tokens to claim for e now: what this instance's demand
// needs for the horizon, less its part of the pool (the region's
// instances share one pool, each counting the part of it that its demand
// is of the region's), bounded by the credit of its share of the global
// rate (the fair share under contention: every instance's share is its
// demand over the total on the boards, so that the claims of one round
// add up to the refill of the global bucket over that round).
func (e *entry) ask(p *limit.Policy, ns int64, horizon time.Duration) int64 {
	rate := float64(p.Rate) / p.Period.Seconds() // tokens/s, global
	share := 1.0
	if e.board.read {
		if total := e.board.total + e.demand; total > 0 {
			share = e.demand / total
		} else {
			share = 0
		}
	}
	// The credit is capped at the share of half the burst, and a first
	// claim starts with that much: the other half stays at home as a
	// reserve, so that claims made at different moments of a round are
	// granted in full and the budget splits by demand, not by who claims
	// right after the bucket refilled.
	dt := time.Duration(ns - e.lastClaim)
	ceiling := max(1, share*float64(p.Limit)/2)
	if e.lastClaim == 0 {
		e.credit = ceiling
	} else {
		e.credit += share * rate * min(dt, time.Second).Seconds()
	}
	e.credit = min(e.credit, ceiling)
	e.lastClaim = ns
	regionDemand := e.demand + e.board.region
	mine := 1.0
	if regionDemand > 0 {
		mine = e.demand / regionDemand
	}
	need := e.demand*horizon.Seconds() - mine*float64(e.pool.Load())
	if !e.established.Load() && e.demand == 0 {
		need = 1 // a key just seen: make the allocation exist
	}
	ask := int64(math.Min(math.Ceil(need), math.Floor(e.credit)))
	if ask < 1 {
		return 0
	}
	return min(ask, p.Limit)
}

// settle files the answers to the claims: a debit is spent at home and
// nothing more; the rest fills the region's pool. A failed claim gives
// its debit back to be tried again; tokens granted but not put in the
// pool (the regional store failed) are lost, never over-admitted.
func (l *Layer) settle(ctx context.Context, now time.Time, claims []limit.Request, claimOf []*entry, debits []int64, granted []limit.Result) {
	var fills []limit.Request
	var fillOf []*entry
	failed := false
	for i, g := range granted {
		e := claimOf[i]
		if g.Err != nil {
			failed = true
			e.floorTaken.Add(debits[i])
			continue
		}
		l.st.claims.Add(1)
		e.established.Store(true)
		debit := min(debits[i], g.Granted)
		l.st.debited.Add(debit)
		if debit < debits[i] { // home had less: the rest is owed, first, at the next claim
			e.floorTaken.Add(debits[i] - debit)
		}
		fill := g.Granted - debit
		e.credit -= float64(fill)
		if fill <= 0 {
			continue
		}
		e.claimed.Add(fill)
		l.st.claimed.Add(fill)
		fills = append(fills, limit.Request{Key: e.key, Cost: fill, Op: limit.OpReturn, Policy: l.derive(claims[i].Policy).pool})
		fillOf = append(fillOf, e)
	}
	if failed {
		l.homeFailed()
	} else if len(claims) > 0 {
		l.homeAnswered(l.now())
	}
	if len(fills) == 0 {
		return
	}
	out := make([]limit.Result, len(fills))
	l.inner.Do(context.WithoutCancel(ctx), fills, out)
	ns := now.UnixNano()
	for i, r := range out {
		if r.Err != nil {
			l.st.lost.Add(fills[i].Cost)
			continue
		}
		fillOf[i].pool.Store(r.Remaining)
		fillOf[i].noteFill(ns, fills[i].Cost)
	}
}

// readBoards files what the boards said: for each key the demand of every
// other instance, and of this region's others apart; fields older than
// boardStale are ignored and deleted at the next exchange.
func (l *Layer) readBoards(ns int64, keys []string, boards []map[string]string) {
	regions := map[string]*Region{}
	prefix := l.region + "/"
	for i, k := range keys {
		v, ok := l.keys.Load(k)
		if !ok || i >= len(boards) {
			continue
		}
		e := v.(*entry)
		b := board{read: true}
		pools := map[string]int64{} // region → its pool of this key: the largest its instances saw
		for f, val := range boards[i] {
			if f == l.field {
				continue
			}
			bv, ok := parseBoard(val)
			age := time.Duration(ns - bv.at*int64(time.Millisecond))
			if !ok || age > boardStale {
				b.stale = append(b.stale, f)
				continue
			}
			b.total += bv.demand
			name, _, _ := strings.Cut(f, "/")
			if strings.HasPrefix(f, prefix) {
				b.region += bv.demand
			} else {
				r := regions[name]
				if r == nil {
					r = &Region{Name: name, LastContact: -1}
					regions[name] = r
				}
				r.Demand += bv.demand
				if p, seen := pools[name]; !seen || bv.pool > p {
					pools[name] = bv.pool
				}
				r.Claimed += bv.claimed
				r.Returned += bv.returned
				r.LastContact = max(r.LastContact, bv.at)
			}
		}
		for name, p := range pools {
			regions[name].Keys++
			regions[name].Held += p
			b.pools += p
		}
		e.board = b
	}
	l.others.Store(&regions)
}

// boardValue is this instance's field on e's board: demand (tokens/s, 0
// once quiet for quietAfter),
// the region's pool as last seen, tokens claimed and returned, and the
// time in unix ms.
func (e *entry) boardValue(ns int64) string {
	d := e.demand
	if time.Duration(ns-e.lastAsk.Load()) > quietAfter {
		d = 0 // quiet: the smoothed demand would take seconds more to reach 0
	}
	b := make([]byte, 0, 48)
	b = strconv.AppendFloat(b, d, 'f', 3, 64)
	for _, n := range []int64{e.pool.Load(), e.claimed.Load(), e.returned.Load(), ns / int64(time.Millisecond)} {
		b = append(b, ' ')
		b = strconv.AppendInt(b, n, 10)
	}
	return string(b)
}

type boardValue struct {
	demand                      float64
	pool, claimed, returned, at int64
}

func parseBoard(s string) (boardValue, bool) {
	f := strings.Fields(s)
	if len(f) != 5 {
		return boardValue{}, false
	}
	var v boardValue
	var err error
	if v.demand, err = strconv.ParseFloat(f[0], 64); err != nil || v.demand < 0 || math.IsInf(v.demand, 0) {
		return boardValue{}, false
	}
	for i, p := range []*int64{&v.pool, &v.claimed, &v.returned, &v.at} {
		if *p, err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return boardValue{}, false
		}
	}
	return v, true
}

// debitRegional owes home, at the next claim, what key's regional bucket
// has spent, read as the global policy p: a key whose policy just became
// global (RL.POLICY SET, a reload) spends from one budget across the
// change, not from a fresh global one beside what the regional policy
// admitted. A key that was never regional has no regional bucket: nothing
// is owed. Instances that saw it regional each owe it: an under-admission.
// The allocator claims nothing for e before this is done, so the debit
// goes with e's first claim: a debit that came after it found home's
// budget already in the pool and was forgiven (the long check: 18
// admitted against 17.26 across a regional-to-global change). Until the
// first claim is answered the floor decides, and is debited too.
func (l *Layer) debitRegional(e *entry, p *limit.Policy) {
	defer func() {
		e.debited.Store(true)
		select { // a new key: claim for it now, not at the next tick
		case l.kick <- struct{}{}:
		default:
		}
	}()
	q := *p
	q.Scope = limit.ScopeRegional
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	out := make([]limit.Result, 1)
	l.inner.Do(ctx, []limit.Request{{Key: e.key, Cost: 1, Op: limit.OpPeek, Policy: &q}}, out)
	if out[0].Err == nil && out[0].Remaining < p.Limit {
		e.floorTaken.Add(p.Limit - out[0].Remaining)
	}
}

// drain gives back to home what is left of e's pool: a region that went
// quiet holds nothing. Tokens taken from the pool that home does not take
// back are lost, never over-admitted.
func (l *Layer) drain(e *entry) { l.giveBack(e, e.p.Load().Limit) }

// giveBack takes up to n tokens out of e's pool and gives them back to
// home's bucket, where what does not fit under its limit is gone; it
// returns the tokens given back.
func (l *Layer) giveBack(e *entry, n int64) int64 {
	p := e.p.Load()
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	out := make([]limit.Result, 1)
	l.inner.Do(ctx, []limit.Request{{Key: e.key, Cost: n, Op: limit.OpClaim, Policy: l.derive(p).pool}}, out)
	if out[0].Err != nil {
		return 0
	}
	// Granted nothing: the pool is empty, so the key can be forgotten once
	// quiet. Before, its estimate stayed, and the key drained every round,
	// forever, counted against MaxKeys.
	e.pool.Store(out[0].Remaining)
	if out[0].Granted == 0 {
		return 0
	}
	back := out[0].Granted
	l.home.Do(ctx, []limit.Request{{Key: e.key, Cost: back, Op: limit.OpReturn, Policy: p}}, out)
	if out[0].Err != nil {
		l.st.lost.Add(back)
		l.homeFailed()
		return 0
	}
	e.returned.Add(back)
	l.st.returned.Add(back)
	return back
}

// drainAll gives back every pool this instance is the only one using, at
// Close.
func (l *Layer) drainAll() {
	ns := l.now().UnixNano()
	if !l.HomeReachable(ns) {
		return
	}
	l.keys.Range(func(_, v any) bool {
		e := v.(*entry)
		if e.board.region < 1e-3 && e.pool.Load() > 0 {
			l.drain(e)
		}
		return true
	})
}

func (l *Layer) observeRTT(d time.Duration) {
	old := l.rtt.Load()
	if old == 0 {
		l.rtt.Store(int64(d))
		return
	}
	l.rtt.Store(old + (int64(d)-old)/4)
}

func (l *Layer) homeAnswered(now time.Time) {
	l.homeDown.Store(false)
	l.lastContact.Store(now.UnixNano())
}

func (l *Layer) homeFailed() {
	if !l.homeDown.Swap(true) {
		l.st.homeOutages.Add(1)
	}
	l.st.homeErrors.Add(1)
}
