package lua

import (
	"fmt"

	"github.com/sluice-rl/sluice/limit"
)

// Args are the script arguments that depend only on a policy: its
// algorithm's id (for Multi), its script, and a1..a3.
type Args struct {
	ID     int
	Script *Script
	A      [3]int64
}

// ArgsFor returns p's script arguments, or the error that makes p
// unrepresentable (the config refuses such policies).
func ArgsFor(p *limit.Policy) (Args, error) {
	switch p.Algorithm {
	case "", limit.TokenBucket, limit.GCRA:
		b, err := p.Bucket()
		if err != nil {
			return Args{}, err
		}
		a := Args{ID: IDTokenBucket, Script: TokenBucket, A: [3]int64{b.Capacity, b.Refill, b.Scale}}
		if p.Algorithm == limit.GCRA {
			a.ID, a.Script = IDGCRA, GCRA
		}
		return a, nil
	case limit.SlidingWindow, limit.FixedWindow:
		w, err := p.Window()
		if err != nil {
			return Args{}, err
		}
		a := Args{ID: IDFixedWindow, Script: FixedWindow, A: [3]int64{w.Limit, w.Ticks, w.Tick}}
		if p.Algorithm == limit.SlidingWindow {
			a.ID, a.Script = IDSlidingWindow, SlidingWindow
		}
		return a, nil
	}
	return Args{}, fmt.Errorf("unknown algorithm %q", p.Algorithm)
}
