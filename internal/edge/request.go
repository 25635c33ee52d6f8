package edge

import (
	"errors"
	"strconv"
)

// The errors of a refused cost or key. Every door answers them in these
// words: RESP after "ERR ", HTTP in its JSON body.
var (
	ErrCost     = errors.New("cost must be a positive integer")
	ErrKeyEmpty = errors.New("key must not be empty")
)

// ParseCost accepts a positive decimal integer that fits an int64, written
// canonically: digits only, no sign, no leading zero, no spaces. It
// allocates nothing.
func ParseCost[T ~string | ~[]byte](b T) (int64, bool) {
	if len(b) == 0 || len(b) > 19 || b[0] == '0' {
		return 0, false
	}
	var n int64
	for i := 0; i < len(b); i++ {
		ch := b[i]
		if ch < '0' || ch > '9' {
			return 0, false
		}
		d := int64(ch - '0')
		if n > (maxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

const maxInt64 = 1<<63 - 1

// Keys is a door's rule for keys: not empty, at most MaxBytes bytes. Make
// one with NewKeys (the zero value has no error to give a long key). It is
// immutable, safe for concurrent use.
type Keys struct {
	maxBytes int
	tooLong  error // made once, so a refusal allocates nothing
}

// NewKeys returns the rule for keys of at most maxBytes bytes.
func NewKeys(maxBytes int) Keys {
	return Keys{maxBytes: maxBytes,
		tooLong: errors.New("key is too long (max " + strconv.Itoa(maxBytes) + " bytes)")}
}

// MaxBytes is the longest key the rule accepts.
func (k *Keys) MaxBytes() int { return k.maxBytes }

// Check returns nil if key is acceptable, else ErrKeyEmpty or the error
// "key is too long (max N bytes)".
func (k *Keys) Check(key string) error { return checkKey(k, key) }

// CheckBytes is Check for a key still in the request's bytes.
func (k *Keys) CheckBytes(key []byte) error { return checkKey(k, key) }

func checkKey[T ~string | ~[]byte](k *Keys, key T) error {
	switch {
	case len(key) == 0:
		return ErrKeyEmpty
	case len(key) > k.maxBytes:
		return k.tooLong
	}
	return nil
}
