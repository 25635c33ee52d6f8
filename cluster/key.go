package cluster

import (
	"strings"

	"github.com/sluice-rl/sluice/internal/keyslot"
)

// Prefix starts every key sluice writes.
const Prefix = "sluice:"

// Key maps a user key to its Redis key, so that no two user keys share a
// hash input unless the user asked for it:
//
//   - a key with a well-formed, non-empty hash tag by the Redis rule (the
//     first '{' and the first '}' after it), like `{acme}:login`, keeps it:
//     `sluice:{acme}:login`, so users can co-locate related keys;
//   - a key without '}' becomes `sluice:{key}`, hashed on all of itself;
//   - any other key (a '}' with no tag before it: `tenant}1`, `a{}b`)
//     becomes `sluice:{}key`. Wrapped in braces it would hash on the text
//     before its first '}' (`tenant`), putting tenant}1, tenant}2, … on one
//     slot; the empty tag `{}` in front makes Redis hash the whole key.
//
// The first two layouts are those of earlier versions, so their state stays
// where it is. Nothing is tagged by prefix or policy, which would pin every
// limit to one slot.
func Key(user string) string {
	switch {
	case hasTag(user):
		return Prefix + user
	case strings.IndexByte(user, '}') < 0:
		return Prefix + "{" + user + "}"
	}
	return Prefix + "{}" + user
}

// hasTag reports whether key has a non-empty hash tag by the Redis Cluster
// rule: the first '{' followed, later, by a '}' with something between.
func hasTag(key string) bool {
	_, ok := keyslot.Tag(key)
	return ok
}

// Slot returns the Redis Cluster hash slot of a Redis key.
func Slot(key string) int { return keyslot.Slot(key) }
