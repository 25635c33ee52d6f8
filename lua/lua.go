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
//	local function <name>(st, limit, rate, unit, cost, op, now, from)
//
// that decides op (0 take, 1 peek, 2 claim, 3 return) for cost on the
// state st at now (µs, the shard's clock) and returns its reply {allowed,
// limit, remaining, retry_after_ms, reset_after_ms, granted, window} and
// the state to store (state.lua). limit, rate and unit are the
// algorithm's exact parameters (Args), which each function names as its
// own:
//
//	algorithm            limit     rate      unit
//	token_bucket, gcra   capacity  refill    scale    (limit.Bucket)
//	the two windows      limit     ticks     tick     (limit.Window)
//	pool                 limit     token_us  ttl_ms   (limit.PoolParams)
//	calendar_window      limit     start     lens     (limit.CalendarWindow)
//
// What two algorithms decide alike is written once and put before them:
// bucket.lua for token_bucket and gcra, window.lua for the two windows.
// The scripts below wrap the functions; they read the clock with the one
// call Clock, so that tests can swap it for a clock argument.

var (
	//go:embed token_bucket.lua
	tokenBucketSrc string
	//go:embed gcra.lua
	gcraSrc string
	//go:embed sliding_window.lua
	slidingWindowSrc string
	//go:embed fixed_window.lua
	fixedWindowSrc string
	//go:embed pool.lua
	poolSrc string
	//go:embed state.lua
	stateSrc string
	//go:embed bucket.lua
	bucketSrc string
	//go:embed window.lua
	windowSrc string
	//go:embed calendar.lua
	calendarSrc string
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

// ReplyInts is the number of integers of one decision in every script's
// reply: allowed, limit, remaining, retry_after_ms, reset_after_ms,
// granted, and the window's start (or a claim's hold in force; 0 for a
// bucket's other ops).
const ReplyInts = 7

// OpArg is the op argument of every script for op (0 take, 1 peek, 2
// claim, 3 return): for a return of a window algorithm that names the
// window its tokens were taken in (from, its start in µs, the 7th value of
// the take's reply), or a claim of a bucket that holds it until |from|
// (negative: extend a hold in force, see token_bucket.lua), op + 4 × from,
// which a double holds exactly; the script gives nothing back to a window
// that has closed.
func OpArg(op int, from int64) int64 {
	if op == 2 && from != 0 || op == 3 && from > 0 {
		return int64(op) + 4*from
	}
	return int64(op)
}

// clockLine reads the clock. A number's string is made a number by
// arithmetic (x + 0, x * 1) in the scripts below, not by tonumber: Lua 5.1
// parses it once that way, twice by tonumber (strtod each time, about 400
// instructions), and makes no C call.
const clockLine = "local clock = " + Clock + "\nlocal now = clock[1] * 1000000 + clock[2]\n"

// single wraps one algorithm's function as a script on KEYS[1]. ARGV:
// limit, rate, unit, cost, op (OpArg). It returns the function's seven integers.
func single(name string, id int, src string) *Script {
	return newScript(name, stateSrc+"\n"+src+"\n"+clockLine+fmt.Sprintf(singleMain, id, name, id, id))
}

const singleMain = `local raw, e = read(KEYS[1], %d)
if raw == nil then return e end
local limit, unit, op = ARGV[1] + 0, ARGV[3] + 0, ARGV[5] + 0
local o = op %% 4 -- op + 4 * from (OpArg); from may be negative
local res, new = decide(%s, raw, %d, limit, ARGV[2] + 0, unit, ARGV[4] + 0, o, now, (op - o) / 4)
if new ~= nil then
  local ttl
  raw, ttl = after(raw, %d, new)
  write(KEYS[1], raw, ttl)
end
return res
`

// The single-key scripts, one per algorithm.
var (
	TokenBucket   = single("token_bucket", IDTokenBucket, bucketSrc+"\n"+tokenBucketSrc)
	GCRA          = single("gcra", IDGCRA, bucketSrc+"\n"+gcraSrc)
	SlidingWindow = single("sliding_window", IDSlidingWindow, windowSrc+"\n"+slidingWindowSrc)
	FixedWindow   = single("fixed_window", IDFixedWindow, windowSrc+"\n"+fixedWindowSrc)
	Pool          = single("pool", IDPool, poolSrc)
	Calendar      = single("calendar_window", IDCalendar, windowSrc+"\n"+calendarSrc)
)

// Algorithm ids of the multi script's ARGV, in the order of its function
// table.
const (
	IDTokenBucket = 1 + iota
	IDGCRA
	IDSlidingWindow
	IDFixedWindow
	IDPool // internal: a region's pool (limit.Pool)
	// IDCalendar is a fixed_window policy with a calendar (limit.Calendar):
	// its limit, rate and unit are limit, start and lens of
	// limit.CalendarWindow, which change at every window boundary (see
	// Args.Until).
	IDCalendar
)

// algorithms is every algorithm's function and the table of them by id,
// with the state functions, for the scripts that decide several keys.
var algorithms = stateSrc + "\n" + bucketSrc + "\n" + windowSrc + "\n" + tokenBucketSrc + "\n" + gcraSrc + "\n" + slidingWindowSrc + "\n" + fixedWindowSrc + "\n" + poolSrc + "\n" + calendarSrc + `
local algs = {token_bucket, gcra, sliding_window, fixed_window, pool, calendar_window}
`

// Multi decides several keys all-or-nothing in one script; the keys must
// share a hash slot. KEYS are the keys; ARGV holds five values per key:
// algorithm id, limit, rate, unit, cost. Every key is peeked; only when every one
// allows is every one taken (a key named twice can still fail on its second
// take: then the takes before it are given back). It returns {allowed,
// then seven integers per key}: the take replies when allowed, else the
// peek replies, and nothing is spent. Every key is read before any is
// decided and each changed key is written once, at the end.
var Multi = newScript("multi", algorithms+clockLine+multiMain)

const multiMain = `local n = #KEYS
local raws, ttls = {}, {}
for i = 1, n do
  local k = KEYS[i]
  if raws[k] == nil then
    local raw, e = read(k, tonumber(ARGV[(i - 1) * 5 + 1]))
    if raw == nil then return e end
    raws[k] = raw
  end
end
local changed = {}
local function call(i, op)
  local b = (i - 1) * 5
  local id = tonumber(ARGV[b + 1])
  local k = KEYS[i]
  local limit, unit = tonumber(ARGV[b + 2]), tonumber(ARGV[b + 4])
  local res, new = decide(algs[id], raws[k], id, limit, tonumber(ARGV[b + 3]), unit, tonumber(ARGV[b + 5]), op, now, 0)
  if new ~= nil then
    raws[k], ttls[k] = after(raws[k], id, new)
    changed[k] = true
  end
  return res
end
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
for i = 1, n do
  local k = KEYS[i]
  if changed[k] then
    write(k, raws[k], ttls[k])
    changed[k] = nil
  end
end
local out = {ok}
for i = 1, n do
  for j = 1, 7 do out[#out + 1] = res[i][j] end
end
return out
`

// BatchItemArgs is the number of ARGV values of one item of Batch.
const BatchItemArgs = 4

// Batch decides a whole per-node batch in one call: keys of any slot the
// node owns, each its own decision, in order. Its keys travel in ARGV (so
// the script carries the allow-cross-slot-keys flag, Redis 7.0 and later):
// first the number P of policies and, for each, algorithm id, limit, rate,
// unit;
// then BatchItemArgs values per item: key, its policy's index (1…P), cost,
// op. A policy's numbers are parsed once a call, not once a key (parsing
// numbers was the largest single cost of a batch in a callgrind profile).
//
// Every key is read first; a key the node cannot serve (another node's
// slot, a migrating slot where the key is missing, a cluster that is down)
// is marked and nothing of it is decided, so that it can go the per-key
// way, which follows MOVED and ASK. The others are decided in order on
// their state in memory (the same key twice sees its first decision), and
// each changed key is written once, at the end: the script never fails
// half-way through its writes. It returns eight integers per item: 1 and
// the seven of its decision, or eight 0s for a marked item.
var Batch = newScript("batch", "#!lua flags=allow-cross-slot-keys\n"+algorithms+clockLine+batchMain)

const batchMain = `local np = ARGV[1] + 0
local pol = {}
for j = 1, np do
  local b = 1 + (j - 1) * 4
  pol[j] = {ARGV[b + 1] + 0, ARGV[b + 2] + 0, ARGV[b + 3] + 0, ARGV[b + 4] + 0} -- {id, limit, rate, unit}
end
-- num[s] is the number s spells, parsed once a call: the items' policy
-- indexes, costs and ops repeat ("1", "0")
local num = setmetatable({}, {__index = function(t, s)
  local v = s + 0
  t[s] = v
  return v
end})
local base = 1 + np * 4
local n = math.floor((#ARGV - base) / 4)
local raws, ttls, bad = {}, {}, {}
for i = 0, n - 1 do
  local k = ARGV[base + i * 4 + 1]
  if raws[k] == nil and not bad[k] then
    local raw = read(k, pol[num[ARGV[base + i * 4 + 2]]][1])
    if raw == nil then bad[k] = true else raws[k] = raw end
  end
end
local out, order, changed = {}, {}, {}
local no, nc = 0, 0
for i = 0, n - 1 do
  local b = base + i * 4
  local k = ARGV[b + 1]
  if bad[k] then
    out[no + 1], out[no + 2], out[no + 3], out[no + 4], out[no + 5], out[no + 6], out[no + 7], out[no + 8] = 0, 0, 0, 0, 0, 0, 0, 0
  else
    local p = pol[num[ARGV[b + 2]]]
    local id = p[1]
    local op = num[ARGV[b + 4]]
    local o = op % 4 -- op + 4 * from (OpArg); from may be negative
    local res, new = decide(algs[id], raws[k], id, p[2], p[3], p[4], num[ARGV[b + 3]], o, now, (op - o) / 4)
    if new ~= nil then
      raws[k], ttls[k] = after(raws[k], id, new)
      if not changed[k] then
        changed[k] = true
        nc = nc + 1
        order[nc] = k
      end
    end
    out[no + 1], out[no + 2], out[no + 3], out[no + 4], out[no + 5], out[no + 6], out[no + 7], out[no + 8] = 1, res[1], res[2], res[3], res[4], res[5], res[6], res[7]
  end
  no = no + 8
end
for j = 1, nc do
  local k = order[j]
  write(k, raws[k], ttls[k])
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
	case IDPool:
		return Pool
	case IDCalendar:
		return Calendar
	}
	return TokenBucket
}
