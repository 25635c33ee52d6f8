package hotkey

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// States of a handRound.
const (
	handNone    = iota // no split decision yet in this hot spell
	handRunning        // a batch is handing the budget over
	handDone           // handed over: split as usual
	handFailed         // not handed over (the store failed, or the spell joined was not ready): the next request tries again
)

// handRound is one try at a key's hand-over on this instance: requests
// of the key wait for ch, closed once state is handDone or handFailed.
type handRound struct {
	ch    chan struct{}
	state atomic.Uint32
	err   error // why it failed; written before ch is closed
}

func newRound(state uint32) *handRound {
	r := &handRound{ch: make(chan struct{})}
	r.state.Store(state)
	return r
}

// end ends the round: done when err is nil, else failed.
func (r *handRound) end(err error) {
	if err != nil {
		r.err = &limit.UnavailableError{Err: fmt.Errorf("split hand-over: %w", err)}
		r.state.Store(handFailed)
	} else {
		r.state.Store(handDone)
	}
	close(r.ch)
}

// errNotReady fails a joining instance's round when the spell it joins
// was not marked ready after maxProbes probes.
var errNotReady = errors.New("the hot spell another instance started is not ready")

// handoff hands a key's budget over from its main bucket to its K
// sub-buckets when the key turns hot on this instance, before the first
// split decision of the hot spell. Untouched sub-buckets are full: without
// it, a key whose main bucket was just drained would get up to one more
// burst from them.
//
// Call 1: claim the main bucket's tokens and hold it for HoldFor
// (limit.OpClaim with a positive, even Hold, cost limit: G = the granted
// tokens, which are discarded; nothing refills the main bucket while it is
// held; a hold already in force is not changed) and peek every
// sub-bucket. When no hold was in force this instance starts the spell:
// call 2 brings each sub-bucket to its share of G (G shared out as the
// limits are: G/K, plus one when i < G%K): it claims what one holds above
// its share and gives back what one lacks, so that the sub-buckets
// together hold what the main bucket held, not a fresh burst nor what a
// past spell left in them, nor the fractions of a token they refilled
// since (see setSubs); its first split
// decision then renews the hold with an odd value, which tells the others
// the sub-buckets are set. An instance that finds a hold in force joins
// the spell and leaves the sub-buckets alone: at once when the hold is
// odd; when it is even (the starter is still setting them), after asking
// again (a claim of 0 with Hold 1), up to maxProbes times. A sub-bucket
// whose peek failed is claimed as if full (a claim takes no more than
// there is), and a failed sub-bucket claim goes once more. When the main
// claim or a probe fails, a sub-bucket claim fails twice, or the spell is
// still not ready, the round fails (see handRound): the key's next
// request tries again, and no request splits over sub-buckets that no
// hand-over set (never written, they read as full).
type handoff struct {
	e       *entry
	subs    []*limit.Policy
	pending int   // answers still due in the current call
	stage   uint8 // 0: main claim and peeks sent; 1: sub-bucket claims sent; 2: failed ones again
	granted int64 // G
	joined  bool  // the main bucket was held already: another instance's spell
	ready   bool  // and that spell's sub-buckets are set (an odd hold)
	probes  int   // the times this instance asked again whether it is
	hold    int64 // the hold the main claim asked for, µs
	main    *limit.Policy
	left    []int64         // each sub-bucket's remaining, -1 when unknown
	claims  []limit.Request // call 2's claim of each sub-bucket
	retry   []int           // sub-buckets whose call-2 claim failed
	round   *handRound
	err     error // the round fails: a main claim, a probe or a second sub-bucket claim failed
	done    bool
}

// maxProbes bounds the times an instance asks again whether the spell it
// joins is ready, one round trip and probePause each; past it (or past
// the context) the round fails and the next request tries again: joined
// as it is, the sub-buckets may not be set yet.
const maxProbes = 64

// probePause is the pause before each probe.
const probePause = time.Millisecond

// startHandoff adds call 1 of e's hand-over to the batch's next store call.
func (b *batch) startHandoff(e *entry, p *limit.Policy, subs []*limit.Policy, r *handRound) {
	b.h.st.handoffs.Add(1)
	now := b.h.now().UnixMicro()
	hold := e.mine.Load()
	if hold <= now {
		// No hold of an earlier round of ours may be in force: a new one.
		hold = (now + holdUs) &^ 1
		e.mine.Store(hold)
		e.granted.Store(0)
	}
	ho := &handoff{e: e, main: p, subs: subs, pending: 1 + len(subs), left: make([]int64, len(subs)), hold: hold, round: r}
	b.handoffs = append(b.handoffs, ho)
	n := len(b.handoffs) - 1
	b.call.add(limit.Request{Key: e.key, Cost: p.Limit, Op: limit.OpClaim, Policy: p, Hold: ho.hold}, pending{kind: kindHandoff, i: n, sub: -1})
	for s, sp := range subs {
		b.call.add(limit.Request{Key: subKey(e.key, s), Cost: 1, Op: limit.OpPeek, Policy: sp}, pending{kind: kindHandoff, i: n, sub: s})
	}
}

// handoffAnswer files one answer to a hand-over's store call.
func (b *batch) handoffAnswer(p pending, res limit.Result) {
	ho := b.handoffs[p.i]
	ho.pending--
	switch {
	case ho.stage != 0: // a sub-bucket claim: a failed one is tried again, once
		switch {
		case res.Err == nil:
		case !p.second:
			ho.retry = append(ho.retry, p.sub)
		case ho.stage == 2:
			ho.err = res.Err // a sub-bucket left above its share: not ready
		}
	case p.sub < 0:
		ho.mainAnswer(res)
	default:
		ho.left[p.sub] = -1
		if res.Err == nil {
			ho.left[p.sub] = res.Remaining
		}
	}
}

// mainAnswer files the answer to the main claim of call 1, or to a probe.
// A hold in force that is the one this instance asked for is its own, of
// an earlier round that failed: it starts the spell still, with the G
// that round's claim got.
func (ho *handoff) mainAnswer(res limit.Result) {
	e := ho.e
	before := res.Window
	switch {
	case res.Err != nil:
		ho.err = res.Err
		return
	case ho.probes > 0 && before == 0:
		// The hold ended while this instance waited: the spell it was
		// to join is over; the next request starts one.
		ho.err = errNotReady
		return
	}
	ho.joined = before > 0 && before != ho.hold
	ho.ready = ho.joined && before&1 == 1
	if ho.joined {
		e.hold.Store(before)
		e.ready.Store(ho.ready)
		return
	}
	ho.granted = res.Granted
	if before == ho.hold {
		ho.granted += e.granted.Load()
	}
	e.granted.Store(ho.granted)
	e.hold.Store(ho.hold)
}

// handoffsNext moves every hand-over whose call has been answered on: from
// call 1 to call 2, or to done, which lets the requests waiting for it go.
// A hand-over that failed, or that joins a spell still not ready after
// maxProbes, ends its round failed: its requests get an unavailable error
// and the key's next request tries again. It never splits over
// sub-buckets no hand-over set.
func (b *batch) handoffsNext() {
	for n, ho := range b.handoffs {
		if ho.done || ho.pending > 0 {
			continue
		}
		if ho.err == nil && ho.stage == 0 && ho.joined && !ho.ready {
			// The starter is still setting the sub-buckets: ask again.
			if ho.probes >= maxProbes {
				ho.err = errNotReady
			} else if ho.err = pause(b.ctx); ho.err == nil {
				ho.probes++
				b.call.add(limit.Request{Key: ho.e.key, Cost: 0, Op: limit.OpClaim, Policy: ho.main, Hold: 1},
					pending{kind: kindHandoff, i: n, sub: -1})
				ho.pending++
				continue
			}
		}
		if ho.err != nil {
			ho.done = true
			ho.round.end(ho.err)
			continue
		}
		if ho.stage == 0 {
			ho.stage = 1
			if !ho.joined {
				b.setSubs(n, ho, ho.granted)
			}
			if ho.pending > 0 {
				continue
			}
		}
		if ho.stage == 1 && len(ho.retry) > 0 {
			// A sub-bucket left above its share would be a second budget:
			// its failed claim goes once more.
			now := b.h.now().UnixMicro()
			for _, s := range ho.retry {
				r := ho.claims[s]
				if r.Hold != 0 {
					r.Hold = -(now + tokenUs(r.Policy))
				}
				b.call.add(r, pending{kind: kindHandoff, i: n, sub: s, second: true})
				ho.pending++
			}
			ho.retry, ho.stage = nil, 2
			continue
		}
		ho.done = true
		ho.round.end(nil)
	}
}

// pause waits probePause, or until ctx is done (its error).
func pause(ctx context.Context) error {
	t := time.NewTimer(probePause)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// setSubs adds call 2 of hand-over ho (handoffs[n]) to the batch's next
// store call: it brings each sub-bucket to its share of g, the tokens the
// main bucket held. A sub-bucket not exactly full may hold a fraction of a
// token besides its whole ones, which no claim of whole tokens takes: one
// whose share is at least one is brought to one token less; one whose
// share is 0 is emptied, fraction and all, by a claim that holds it for
// one token interval (a hold sets what a claim leaves to 0; the one token
// it does not refill meanwhile is the under-admission the share-1 of the
// others has too). Left with a fraction, K sub-buckets of share 0 would
// hold up to K tokens the main bucket never gave (an RL.RESET empties
// them, then they refill beside a full main bucket).
func (b *batch) setSubs(n int, ho *handoff, g int64) {
	k := int64(len(ho.subs))
	now := b.h.now().UnixMicro()
	ho.claims = make([]limit.Request, len(ho.subs))
	for s, sp := range ho.subs {
		left := ho.left[s]
		if left < 0 {
			left = sp.Limit // unknown: claim as if full; a claim takes no more than there is
		}
		share := min(sp.Limit, g/k+b2i(int64(s) < g%k))
		var hold int64
		switch {
		case ho.left[s] == sp.Limit: // exactly full: no fraction
		case share > 0:
			share-- // at most its share, with the fraction
		case sp.Algorithm.IsBucket():
			hold = -(now + tokenUs(sp)) // nothing, not even the fraction
		}
		claim := limit.Request{Key: subKey(ho.e.key, s), Cost: left - share, Op: limit.OpClaim, Policy: sp, Hold: hold}
		if hold != 0 {
			claim.Cost = sp.Limit
		}
		switch c := left - share; {
		case c > 0 || claim.Hold != 0:
			ho.claims[s] = claim
			b.call.add(claim, pending{kind: kindHandoff, i: n, sub: s})
			ho.pending++
		case c < 0 && ho.left[s] >= 0:
			// Below its share (drained by an RL.RESET, or spent in a past
			// spell): topped up, so that the sub-buckets hold what the
			// main bucket held.
			b.call.add(limit.Request{Key: subKey(ho.e.key, s), Cost: -c, Op: limit.OpReturn, Policy: sp},
				pending{kind: kindHandoff, i: n, sub: s, second: true})
			ho.pending++
		}
	}
}

// tokenUs is the time p takes to refill one token, in µs, at least 1.
func tokenUs(p *limit.Policy) int64 {
	us := int64(p.Period / time.Microsecond)
	return max(1, (us+p.Rate-1)/p.Rate)
}
