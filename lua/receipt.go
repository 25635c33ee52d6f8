package lua

import (
	_ "embed"

	"github.com/sluice-rl/sluice/limit"
)

//go:embed receipt.lua
var receiptSrc string

// TakeReceipt is RL.TAKE … RECEIPT: the take of the single-key scripts
// (any algorithm, by id) that, when it admits a cost above 0, records the
// take under its receipt in the same call. KEYS: the state, the receipt's
// key (the state's slot). ARGV: algorithm id, limit, rate, unit (Args), cost, the
// policy's owner (limit.Policy.Owner), the receipt's TTL in ms for a
// bucket algorithm (limit.ReceiptLifeMs; the windows' is computed here).
// It returns the take's seven integers.
var TakeReceipt = newScript("take_receipt", algorithms+"\n"+receiptSrc+"\n"+clockLine+takeReceiptMain)

const takeReceiptMain = `local id = tonumber(ARGV[1])
local raw, e = read(KEYS[1], id)
if raw == nil then return e end
local limit, rate, unit, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local res, new = decide(algs[id], raw, id, limit, rate, unit, cost, 0, now, 0)
if new ~= nil then
  local ttl
  raw, ttl = after(raw, id, new)
  write(KEYS[1], raw, ttl)
end
if res[1] == 1 and cost > 0 and id ~= 5 then
  local life = receipt_life(id, rate, unit, res[7], now, tonumber(ARGV[7]))
  redis.call('SET', KEYS[2], receipt_value(cost, res[7], ARGV[6], now + life * 1000), 'PX', life)
end
return res
`

// GiveBack is RL.ADJUST key -n receipt: when the receipt's key holds a
// receipt in force (the shard's clock before its expiry) of the policy's
// owner for a take of at least n, it deletes the
// receipt and returns n to the state the take came from (op 3 to its
// window: nothing to a window that has closed, never above the limit),
// in one call. KEYS: the state, the receipt's key. ARGV: algorithm id,
// limit, rate, unit (Args), n, the policy's owner. It returns the give-back's seven
// integers, or, when it refuses and changes nothing, {0, 0, 0, -1, 0,
// code, 0}: code GiveBackInvalid, GiveBackPolicy or GiveBackCost.
var GiveBack = newScript("give_back", algorithms+"\n"+receiptSrc+"\n"+clockLine+giveBackMain)

const giveBackMain = `local id = tonumber(ARGV[1])
local raw, e = read(KEYS[1], id)
if raw == nil then return e end
local v = redis.call('GET', KEYS[2])
if not v then return {0, 0, 0, -1, 0, -1, 0} end
local c, w, who, x = string.match(v, '^(%d+) (%d+) (%x+) (%d+)$')
if x == nil or now >= tonumber(x) then return {0, 0, 0, -1, 0, -1, 0} end
if who ~= ARGV[6] then return {0, 0, 0, -1, 0, -2, 0} end
local back = tonumber(ARGV[5])
if back > tonumber(c) then return {0, 0, 0, -1, 0, -3, 0} end
redis.call('DEL', KEYS[2])
local limit, rate, unit = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local res, new = decide(algs[id], raw, id, limit, rate, unit, back, 3, now, tonumber(w))
if new ~= nil then
  local ttl
  raw, ttl = after(raw, id, new)
  write(KEYS[1], raw, ttl)
end
return res
`

// The codes of GiveBack's refusals, in the 6th integer of its reply.
const (
	GiveBackInvalid = -1 // no such receipt on this key: forged, used, expired, another key's
	GiveBackPolicy  = -2 // taken under another policy
	GiveBackCost    = -3 // more than the take's cost
)

// GiveBackErr is the error of GiveBack's reply r (its 6th integer in
// r.Granted), nil when it gave back.
func GiveBackErr(r *limit.Result) error {
	switch r.Granted {
	case GiveBackInvalid:
		return limit.ErrReceiptInvalid
	case GiveBackPolicy:
		return limit.ErrReceiptPolicy
	case GiveBackCost:
		return limit.ErrReceiptCost
	}
	return nil
}
