package cluster

import (
	"strings"

	"github.com/sluice-rl/sluice/internal/keyslot"
	"github.com/sluice-rl/sluice/limit"
)

// Prefix starts the Redis key of every user key's state.
const Prefix = "sluice:"

// The prefixes of the internal spaces (limit.Space). None of them starts
// with Prefix, so no user key maps under one. Each is followed by the text
// Key puts after Prefix for the key, so an internal state keeps its user
// key's hash tag (and, for most keys, its slot).
const (
	ThrottlePrefix = "sluice-cl:"
	SplitPrefix    = "sluice-split:"
	PoolPrefix     = "sluice-pool:"
	FloorPrefix    = "sluice-floor:"
	// ReceiptPrefix starts a receipt's key (limit.SpaceReceipt): see
	// ReceiptKey.
	ReceiptPrefix = "sluice-rcpt:"
)

// Key maps a user key to its Redis key, so that no two user keys share a
// state and each keeps the hash tag it asked for:
//
//   - a key without '}' becomes `sluice:{key}`, hashed on all of itself;
//   - a key with a '}' but no well-formed tag by the Redis rule (the first
//     '{' and the first '}' after it, something between), like `tenant}1`
//     or `a{}b`, becomes `sluice:{}key`: wrapped in braces it would hash on
//     the text before its first '}', putting tenant}1, tenant}2, … on one
//     slot; the empty tag `{}` in front makes Redis hash the whole key;
//   - a key with a well-formed tag, like `{acme}:login`, keeps it:
//     `sluice:{acme}:login`, so users can co-locate related keys; except
//     that a key that is only a tag and closing braces, `{v}`, `{v}}`, …
//     (v without '}'), gets one '}' more, since `sluice:{v}` is the key of
//     `v` itself (v may hold '{': `{a{b}` and `a{b`). The tag, v, is the
//     same.
//
// It is injective: the first form ends in the key's only '}', the second
// starts with "{}" (which no tagged key does: its first '{' is followed by
// a non-empty tag), the third is the key itself except on the family {v}}*,
// which it shifts by one '}' within the family, whose members are never
// the key itself. Nothing is tagged by prefix or policy, which would pin
// every limit to one slot.
func Key(user string) string {
	switch {
	case hasTag(user):
		if onlyTag(user) {
			return Prefix + user + "}"
		}
		return Prefix + user
	case strings.IndexByte(user, '}') < 0:
		return Prefix + "{" + user + "}"
	}
	return Prefix + "{}" + user
}

// onlyTag reports whether the tagged key is `{v}` followed by nothing but
// '}': the shapes whose Redis key would otherwise be that of a key
// without braces.
func onlyTag(key string) bool {
	if key[0] != '{' {
		return false
	}
	return strings.Trim(key[strings.IndexByte(key, '}'):], "}") == ""
}

// SpaceKey maps a key of space s (limit.Space) to its Redis key: Key for a
// user's key, else the space's prefix followed by what Key puts after
// Prefix. Distinct (space, key) pairs never share a Redis key.
func SpaceKey(s limit.Space, key string) string {
	k := Key(key)
	switch s {
	case limit.SpaceThrottle:
		return ThrottlePrefix + k[len(Prefix):]
	case limit.SpaceSplit:
		return SplitPrefix + k[len(Prefix):]
	case limit.SpacePool:
		return PoolPrefix + k[len(Prefix):]
	case limit.SpaceFloor:
		return FloorPrefix + k[len(Prefix):]
	case limit.SpaceReceipt:
		return ReceiptPrefix + "{" + slotTag(Slot(k)) + "}" + k[len(Prefix):]
	}
	return k
}

// ReceiptKey is the Redis key of receipt id (limit.NewReceipt, a fixed
// length) of a take on the user key: the receipt space's key of user,
// then ':' and id, so distinct (key, id) pairs never share one. Its hash
// tag, the first thing after ReceiptPrefix, is a tag of the slot of the
// user key's state (slotTag), so that one script call can write both:
// prefixing the state's key would not do, since a key of the form
// `sluice:{}…` is hashed whole.
func ReceiptKey(user, id string) string {
	return SpaceKey(limit.SpaceReceipt, user) + ":" + id
}

// spaceKeyOf is SpaceKey for a key under p; a nil p is a user key.
func spaceKeyOf(p *limit.Policy, key string) string {
	if p == nil {
		return Key(key)
	}
	return SpaceKey(p.Space, key)
}

// hasTag reports whether key has a non-empty hash tag by the Redis Cluster
// rule: the first '{' followed, later, by a '}' with something between.
func hasTag(key string) bool {
	_, ok := keyslot.Tag(key)
	return ok
}

// Slot returns the Redis Cluster hash slot of a Redis key.
func Slot(key string) int { return keyslot.Slot(key) }
