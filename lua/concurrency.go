package lua

import _ "embed"

//go:embed concurrency.lua
var concurrencySrc string

// Acquire is RL.ACQUIRE's script on KEYS[1], a concurrency limit's sorted
// set (concurrency.lua). ARGV: limit (slots), ttl_ms, token. It returns
// the seven integers of every script: allowed, limit, free slots after,
// retry_after_ms, reset_after_ms, 0, 0.
var Acquire = newScript("acquire", concurrencySrc+"\n"+clockLine+
	"return acquire(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], now)\n")

// Release is RL.RELEASE's script on KEYS[1]. ARGV: token. It returns
// seven integers, the first 1 when the slot was held, else 0.
var Release = newScript("release", concurrencySrc+"\n"+clockLine+
	"return release(KEYS[1], ARGV[1], now)\n")
