package layercheck

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// subKey is the name hotkey gave sub-bucket i of a split key before the
// split space (a user key of that spelling was the sub-bucket itself),
// copied so that a user key can be spelled exactly like one.
func subKey(key string, i int) string {
	tag := subTag(i)
	if open := strings.IndexByte(key, '{'); !(open >= 0 && strings.IndexByte(key[open+1:], '}') > 0) && strings.IndexByte(key, '}') >= 0 {
		h := fnv.New64a()
		_, _ = h.Write([]byte(key))
		return "{" + tag + ":#" + strconv.FormatUint(h.Sum64(), 36) + "}" + key
	}
	return "{" + tag + ":" + key + "}"
}

// splitKey is hotkey's name for sub-bucket i of key in the split space now
// (hotkey/lease.go): spelled as a user key, it must still be a user key.
func splitKey(key string, i int) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return "{" + subTag(i) + ":" + strconv.FormatUint(h.Sum64(), 36) + "}" + key
}

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

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
