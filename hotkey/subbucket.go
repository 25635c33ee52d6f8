package hotkey

import (
	"hash/fnv"
	"strconv"

	"github.com/sluice-rl/sluice/limit"
)

// The sub-buckets of a split key: their policies, which sum exactly to
// the key's, and their keys, each on a slot of its own.

// subPolicies returns the k sub-bucket policies of split policy p, nil when
// p cannot be split (fewer than 2 sub-buckets, or a sub-bucket the store
// could not represent exactly). Sub-bucket i gets Limit/k and Rate/k, plus
// one when i < Limit%k (resp. Rate%k), so they sum exactly to p; k is
// p.Hot.Split, but at most Limit and Rate so that each gets at least one.
// The pointers are stable while cached, as the cluster store keys its
// argument cache by policy pointer.
func (h *Layer) subPolicies(p *limit.Policy) []*limit.Policy {
	if s, ok := h.subs.Get(p); ok {
		return s
	}
	k := int64(min(int64(p.Hot.Split), p.Limit, p.Rate))
	if k < 2 {
		return nil
	}
	subs := make([]*limit.Policy, k)
	for i := range k {
		q := *p
		q.Limit = p.Limit/k + b2i(i < p.Limit%k)
		q.Rate = p.Rate/k + b2i(i < p.Rate%k)
		q.Hot, q.Space = limit.Hot{Mode: limit.HotOff}, limit.SpaceSplit
		if _, err := q.Bucket(); err != nil {
			return nil
		}
		subs[i] = &q
	}
	h.subs.Add(p, subs)
	return subs
}

// subKey names sub-bucket i of key in the split space (limit.SpaceSplit,
// which no user key reaches): "{" + subTag(i) + ":" + FNV-1a of key + "}"
// + key. Its hash tag is the sub-bucket's own, whatever key's tag, so the
// sub-buckets of one key hash to different slots; the tag is the same on
// every instance. Injective in (key, i): neither the sub-tag nor the hash
// holds a '}', so the key is what follows the first '}', and the sub-tag
// names i.
func subKey(key string, i int) string {
	tag := ""
	if i >= 0 && i < len(subTags) {
		tag = subTags[i]
	} else {
		tag = subTag(i)
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return "{" + tag + ":" + strconv.FormatUint(h.Sum64(), 36) + "}" + key
}

// subTags caches subTag for every sub-bucket a policy may have (policy's
// MaxSplit is 64).
var subTags = func() (t [64]string) {
	for i := range t {
		t[i] = subTag(i)
	}
	return t
}()

// subTag is the hash-tag prefix of sub-bucket i: 8 base-32 characters (40
// bits) of splitmix64(i), the same in every instance and every version.
// Slots are CRC16, which is linear: tags that differ in one character near
// the start ("s0:", "s1:", …) differ in a few low bits of the slot only,
// and land together on one primary. Prefixes that differ in many bits move
// the slots of one key's sub-buckets independently over the slot space.
func subTag(i int) string {
	const digits = "0123456789abcdefghijklmnopqrstuv"
	x := splitmix64(uint64(i))
	var b [8]byte
	for j := range b {
		b[j] = digits[x&31]
		x >>= 5
	}
	return string(b[:])
}

// splitmix64 is the output function of the SplitMix64 generator, a
// bijection that mixes every input bit into every output bit.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
