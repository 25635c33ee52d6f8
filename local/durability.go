package local

import (
	"errors"

	"github.com/sluice-rl/sluice/limit"
)

// ErrNoReplica is why the embedded store refuses a policy with
// durability: replica: it is one process's memory, with no replica that
// a spend could wait for, so the promise could never be kept; a config
// that asks for it is refused (at start, on reload and by RL.POLICY SET)
// rather than answering every spend by on_store_error.
var ErrNoReplica = errors.New("replica needs a Redis store with replicas; the embedded store has none")

// CheckDurability reports ErrNoReplica for a policy the embedded store
// cannot keep (durability: replica), nil otherwise.
func CheckDurability(p *limit.Policy) error {
	if p.Durable() {
		return ErrNoReplica
	}
	return nil
}
