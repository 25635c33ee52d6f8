package lua

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strings"
)

// Each algorithm file defines one Lua function,
//
//	local function <name>(key, a1, a2, a3, cost, op, now)
//
// that decides op (0 take, 1 peek, 2 claim, 3 return) for cost on key at
// now (µs, the shard's clock), writes what changed, and returns {allowed,
// limit, remaining, retry_after_ms, reset_after_ms, granted}. a1..a3 are the
// algorithm's exact parameters: capacity, refill, scale for the bucket
// algorithms (limit.Bucket), limit, ticks, tick for the windows
// (limit.Window). The scripts below wrap the functions; they read the clock
// with the one call Clock, so that tests can swap it for a clock argument.

var (
	//go:embed token_bucket.lua
	tokenBucketSrc string
	//go:embed gcra.lua
	gcraSrc string
	//go:embed sliding_window.lua
	slidingWindowSrc string
	//go:embed fixed_window.lua
	fixedWindowSrc string
)

// Clock is the expression every script reads the shard's clock with, once.
// Its value is {seconds, microseconds}.
const Clock = "redis.call('TIME')"

// TestClock replaces Clock in tests: the clock then comes from the last two
// arguments of the script, seconds and microseconds.
const TestClock = "{ARGV[#ARGV-1], ARGV[#ARGV]}"

// Script is one Lua script and its SHA1, as EVALSHA names it.
type Script struct {
	Name string
	Src  string
	SHA  string
}

func newScript(name, src string) *Script {
	sum := sha1.Sum([]byte(src))
	return &Script{Name: name, Src: src, SHA: hex.EncodeToString(sum[:])}
}

// WithTestClock returns the script with its clock read from its last two
// arguments (seconds, microseconds) instead of TIME: the one change.
func (s *Script) WithTestClock() *Script {
	if strings.Count(s.Src, Clock) != 1 {
		panic(fmt.Sprintf("lua: %s must read the clock exactly once", s.Name))
	}
	return newScript(s.Name+"-test-clock", strings.Replace(s.Src, Clock, TestClock, 1))
}

const clockLine = "local clock = " + Clock + "\nlocal now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])\n"

// single wraps one algorithm's function as a script on KEYS[1]. ARGV: a1,
// a2, a3, cost, op. It returns the function's six integers.
func single(name, src string) *Script {
	return newScript(name, src+"\n"+clockLine+
		"return "+name+"(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), now)\n")
}

// The single-key scripts, one per algorithm.
var (
	TokenBucket   = single("token_bucket", tokenBucketSrc)
	GCRA          = single("gcra", gcraSrc)
	SlidingWindow = single("sliding_window", slidingWindowSrc)
	FixedWindow   = single("fixed_window", fixedWindowSrc)
)

// Algorithm ids of the multi script's ARGV, in the order of its function
// table.
const (
	IDTokenBucket = 1 + iota
	IDGCRA
	IDSlidingWindow
	IDFixedWindow
)

// Multi decides several keys all-or-nothing in one script; the keys must
// share a hash slot. KEYS are the keys; ARGV holds five values per key:
// algorithm id, a1, a2, a3, cost. Every key is peeked; only when every one
// allows is every one taken (a key named twice can still fail on its second
// take: then the takes before it are given back). It returns {allowed,
// then six integers per key}: the take replies when allowed, else the
// peek replies, and nothing is spent.
var Multi = newScript("multi", tokenBucketSrc+"\n"+gcraSrc+"\n"+slidingWindowSrc+"\n"+fixedWindowSrc+"\n"+clockLine+multiMain)

const multiMain = `local algs = {token_bucket, gcra, sliding_window, fixed_window}
local function call(i, op, cost)
  local b = (i - 1) * 5
  local f = algs[tonumber(ARGV[b + 1])]
  return f(KEYS[i], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3]), tonumber(ARGV[b + 4]), cost or tonumber(ARGV[b + 5]), op, now)
end
local n = #KEYS
local res = {}
local ok = 1
for i = 1, n do
  res[i] = call(i, 1)
  if res[i][1] == 0 then ok = 0 end
end
if ok == 1 then
  for i = 1, n do
    local r = call(i, 0)
    if r[1] == 0 then
      ok = 0
      for j = 1, i - 1 do res[j] = call(j, 3) end
      res[i] = r
      break
    end
    res[i] = r
  end
end
local out = {ok}
for i = 1, n do
  for j = 1, 6 do out[#out + 1] = res[i][j] end
end
return out
`

// For returns the single-key script of algorithm id (IDTokenBucket...).
func For(id int) *Script {
	switch id {
	case IDGCRA:
		return GCRA
	case IDSlidingWindow:
		return SlidingWindow
	case IDFixedWindow:
		return FixedWindow
	}
	return TokenBucket
}
