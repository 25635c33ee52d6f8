package limit

import (
	"errors"
	"fmt"
)

// ErrNotAdjustable is the error of an RL.ADJUST whose policy cannot be
// adjusted; errors.Is matches the *AdjustError that carries it.
var ErrNotAdjustable = errors.New("not adjustable")

// AdjustError names the policy an RL.ADJUST was refused for and why.
type AdjustError struct {
	Policy string
	Why    string
}

func (e *AdjustError) Error() string {
	return fmt.Sprintf("RL.ADJUST is not supported for policy '%s': %s", e.Policy, e.Why)
}

// Is reports ErrNotAdjustable as a match.
func (e *AdjustError) Is(target error) bool { return target == ErrNotAdjustable }

// Adjustable reports whether OpAdjust applies to p's state, or the
// *AdjustError that says why not. Every algorithm of Algorithms is
// adjustable. A global policy is not: its regional pool is filled by the
// region's allocator from the home bucket, so a debt or a give-back there
// would not reach the budget it corrects (docs/regions.md). An algorithm
// that holds slots rather than tokens gets one case here.
func (p *Policy) Adjustable() error {
	switch {
	case p.Global():
		return &AdjustError{Policy: p.Name, Why: "scope: global budgets are spent through region pools; adjust is regional only"}
	case p.Algorithm == Pool:
		return &AdjustError{Policy: p.Name, Why: "a region pool is internal"}
	}
	return nil
}
