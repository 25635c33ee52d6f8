// Package keyslot computes Redis Cluster hash slots and tags. It is the one
// copy of that rule, shared by the store (package cluster), the hot-key
// layer's sub-bucket keys and the test harness (internal/localredis).
package keyslot

import "strings"

// Count is the number of hash slots of a Redis Cluster.
const Count = 16384

// Slot returns the cluster hash slot of key, as CLUSTER KEYSLOT does: CRC16
// (XMODEM) modulo 16384 of the whole key, or, when the key has a non-empty
// hash tag, of the text between its first '{' and the first '}' after it.
func Slot(key string) int {
	if tag, ok := Tag(key); ok {
		key = tag
	}
	return int(crc16(key) % Count)
}

// Tag returns key's hash tag, the text between its first '{' and the first
// '}' after it, and whether it has one that is not empty.
func Tag(key string) (string, bool) {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j], true
		}
	}
	return "", false
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0).
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
