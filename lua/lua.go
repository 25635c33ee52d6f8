package lua

import _ "embed"

// TokenBucket is the token-bucket decision script (token_bucket.lua).
//
// KEYS[1] is the bucket key. ARGV: capacity, refill, scale, cost, op
// (0 take, 1 peek, 2 claim, 3 return). It returns {allowed, limit,
// remaining, retry_after_ms, reset_after_ms, granted}; see the file for the
// units.
//
//go:embed token_bucket.lua
var TokenBucket string
