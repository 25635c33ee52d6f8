package edge

import (
	"errors"
	"fmt"

	"github.com/sluice-rl/sluice/limit"
)

// The errors of RL.ACQUIRE's ttl_ms and RL.RELEASE's token, the same words
// at every door.
var (
	ErrTTL = fmt.Errorf("ttl_ms must be a positive integer of at most %d (%s)",
		limit.MaxSlotTTL.Milliseconds(), limit.MaxSlotTTL)
	ErrTokenEmpty = errors.New("token must not be empty")
	ErrTokenLong  = fmt.Errorf("token must be at most %d bytes", limit.MaxTokenBytes)
)

// ParseTTL accepts RL.ACQUIRE's ttl_ms: a positive integer as ParseCost
// reads it, at most limit.MaxSlotTTL in ms. A larger one is refused, not
// cut: a holder that asked for longer would lose its slot early.
func ParseTTL[T ~string | ~[]byte](b T) (int64, error) {
	n, ok := ParseCost(b)
	if !ok || n > limit.MaxSlotTTL.Milliseconds() {
		return 0, ErrTTL
	}
	return n, nil
}

// CheckToken checks RL.RELEASE's token: not empty, at most
// limit.MaxTokenBytes. Any other token is looked up (and, unless it is
// the one an acquire of this key returned, answers 0).
func CheckToken[T ~string | ~[]byte](tok T) error {
	switch {
	case len(tok) == 0:
		return ErrTokenEmpty
	case len(tok) > limit.MaxTokenBytes:
		return ErrTokenLong
	}
	return nil
}
