package cluster

import (
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

// adjustArgs is how an OpAdjust of delta travels to the scripts, single
// and batch alike (lua.ScriptOp): a return of -delta to the current
// window (from 0), so that a negative delta gives back and a positive
// one spends without a check.
func adjustArgs(delta int64) (cost int64, op limit.Op, from int64) {
	c, o := lua.ScriptOp(limit.OpAdjust, delta)
	return c, limit.Op(o), 0
}
