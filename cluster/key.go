package cluster

import "strings"

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
func Slot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	return int(crc16(key) % 16384)
}

// crc16 is CRC-16/XMODEM, the checksum Redis Cluster slots use.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
