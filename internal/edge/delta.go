package edge

import (
	"errors"

	"github.com/sluice-rl/sluice/limit"
)

// MaxDelta is the largest |delta| RL.ADJUST accepts: every count the
// scripts keep is an exact integer below 2^53 (limit.MaxScaled).
const MaxDelta = limit.MaxScaled - 1

// ErrDelta is the error of a refused RL.ADJUST delta, in every door's
// words.
var ErrDelta = errors.New("delta must be an integer between -9007199254740991 and 9007199254740991")

// ParseDelta accepts RL.ADJUST's delta: 0, or a canonical decimal
// integer (ParseCost's form) with an optional leading '-', at most
// MaxDelta in magnitude. It allocates nothing.
func ParseDelta[T ~string | ~[]byte](b T) (int64, bool) {
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	n, ok := ParseCost(b)
	if !ok || n > MaxDelta {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}
