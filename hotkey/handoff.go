package hotkey

import "github.com/sluice-rl/sluice/limit"

// States of entry.hand.
const (
	handNone    = iota // no split decision yet in this hot spell
	handRunning        // a batch is handing the budget over
	handDone           // handed over, or given up: split as usual
)

// handoff hands a key's budget over from its main bucket to its K
// sub-buckets when the key turns hot on this instance, before the first
// split decision of the hot spell. Untouched sub-buckets are full: without
// it, a key whose main bucket was just drained would get up to one more
// burst from them.
//
// Call 1: claim the main bucket's tokens (limit.OpClaim, cost limit: G =
// the granted tokens, which are discarded) and peek every sub-bucket. Call
// 2: claim, from each sub-bucket found full, its limit minus its share of
// G (G shared out as the limits are: G/K, plus one when i < G%K), so that
// the sub-buckets together hold what the main bucket held. A sub-bucket
// not full is in use by another instance that saw the key hot first: it
// keeps its tokens. A failed claim or peek is not retried: the hand-over
// gives up on what it could not read (a sub-bucket left full, or, when the
// main claim failed, all of them) and the key is split anyway.
type handoff struct {
	e       *entry
	subs    []*limit.Policy
	pending int   // answers still due in the current call
	stage   uint8 // 0: main claim and peeks sent; 1: sub-bucket claims sent
	granted int64 // G, -1 when the main claim failed
	full    []bool
	done    bool
}

// startHandoff adds call 1 of e's hand-over to the batch's next store call.
func (b *batch) startHandoff(e *entry, p *limit.Policy, subs []*limit.Policy) {
	b.h.st.handoffs.Add(1)
	ho := &handoff{e: e, subs: subs, pending: 1 + len(subs), full: make([]bool, len(subs))}
	b.handoffs = append(b.handoffs, ho)
	n := len(b.handoffs) - 1
	b.call.add(limit.Request{Key: e.key, Cost: p.Limit, Op: limit.OpClaim, Policy: p}, pending{kind: kindHandoff, i: n, sub: -1})
	for s, sp := range subs {
		b.call.add(limit.Request{Key: subKey(e.key, s), Cost: 1, Op: limit.OpPeek, Policy: sp}, pending{kind: kindHandoff, i: n, sub: s})
	}
}

// handoffAnswer files one answer to a hand-over's store call.
func (b *batch) handoffAnswer(p pending, res limit.Result) {
	ho := b.handoffs[p.i]
	ho.pending--
	switch {
	case ho.stage != 0: // a sub-bucket claim: nothing to do, failed or not
	case p.sub < 0:
		ho.granted = -1
		if res.Err == nil {
			ho.granted = res.Granted
		}
	default:
		ho.full[p.sub] = res.Err == nil && res.Remaining >= ho.subs[p.sub].Limit
	}
}

// handoffsNext moves every hand-over whose call has been answered on: from
// call 1 to call 2, or to done, which lets the requests waiting for it go.
func (b *batch) handoffsNext() {
	for n, ho := range b.handoffs {
		if ho.done || ho.pending > 0 {
			continue
		}
		if ho.stage == 0 {
			ho.stage = 1
			if g := ho.granted; g >= 0 {
				k := int64(len(ho.subs))
				for s, sp := range ho.subs {
					if !ho.full[s] {
						continue
					}
					share := min(sp.Limit, g/k+b2i(int64(s) < g%k))
					if c := sp.Limit - share; c > 0 {
						b.call.add(limit.Request{Key: subKey(ho.e.key, s), Cost: c, Op: limit.OpClaim, Policy: sp},
							pending{kind: kindHandoff, i: n, sub: s})
						ho.pending++
					}
				}
			}
			if ho.pending > 0 {
				continue
			}
		}
		ho.done = true
		ho.e.hand.Store(handDone)
		close(ho.e.handed)
	}
}
