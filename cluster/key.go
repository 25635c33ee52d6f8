package cluster

import (
	"strings"

	"github.com/sluice-rl/sluice/internal/keyslot"
)

// Prefix starts every key sluice writes.
const Prefix = "sluice:"

// Key maps a user key to its Redis key: `sluice:{key}`, so that each user
// key hashes on all of itself; a user key that already carries a non-empty
// hash tag, like `{acme}:login`, keeps it (`sluice:{acme}:login`), so users
// can co-locate related keys. Nothing is tagged by prefix or policy, which
// would pin every limit to one slot.
func Key(user string) string {
	if hasTag(user) {
		return Prefix + user
	}
	return Prefix + "{" + user + "}"
}

// hasTag reports whether key has a non-empty hash tag by the Redis Cluster
// rule: the first '{' followed, later, by a '}' with something between.
func hasTag(key string) bool {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return false
	}
	end := strings.IndexByte(key[open+1:], '}')
	return end > 0
}

// Slot returns the Redis Cluster hash slot of a Redis key.
func Slot(key string) int { return keyslot.Slot(key) }
