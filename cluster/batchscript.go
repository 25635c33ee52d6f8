package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/lua"
)

// minBatch is the fewest single-key requests that go to the batch script,
// on a node that runs scripts but not functions; minBatchFunc the fewest
// that go to the batch library (function.go). Counted with callgrind on
// redis-server 7.0.15 (instructions are exact where timings on a shared
// machine are not), fresh keys, pipelines of 16 calls, 1,000 calls a
// phase, two rounds, per decision: the single-key script 94,300–97,500;
// the batch script (EVALSHA) 134,500–135,600 for one key, 98,500–99,300
// for two, 85,000–88,100 for three, 79,600–80,200 for four, 70,300 for
// eight, 64,900–65,000 for sixteen; the library (FCALL) 115,800–116,600,
// 86,900–88,100, 79,900–80,300, 75,800–76,400, 67,000–68,400 and
// 64,300–64,500. A script call builds the closures and tables of all
// four algorithms again, about 18,000–20,000 instructions a call that a
// function built once at FUNCTION LOAD; what is left a call (the policy
// table, the call's own tables, FCALL itself) still makes one key cheaper
// by its own script, but two already cheaper in one FCALL (87,500 against
// 95,900 a decision) and not yet in one EVALSHA (98,900).
const (
	minBatch     = 3
	minBatchFunc = 2
)

// scratch holds the slices one pipeline builds and drops when it returns:
// the split of its items, the batch script's arguments, the commands.
// Reused through scratchPool, they cost a pipeline no allocation once warm
// (they were six of a 16-key Do's 63). A scratch belongs to one call of
// nodeQueue.pipeline: nothing it holds is used after that call returns (go-redis
// keeps no command or argument past Pipelined), so reuse cannot reach an
// object still in use.
type scratch struct {
	batched, rest []*item
	idx           []int
	pols          []*policyArgs
	args          []any
	cmds          []*redis.IntSliceCmd
}

// scratchPool is a pool of *scratch, shared by every Store: a pool is safe
// for concurrent use and holds no state that outlives a call.
var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// maxScratch bounds the slices a scratch keeps for the next pipeline: a
// rare huge batch (MaxBatch raised far) is left to the collector.
const maxScratch = 4096

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// putScratch clears sc, so that it holds no item, key or command of the
// pipeline it served, and returns it to the pool.
func putScratch(sc *scratch) {
	if cap(sc.args) > maxScratch || cap(sc.batched) > maxScratch || cap(sc.rest) > maxScratch {
		return
	}
	clear(sc.batched[:cap(sc.batched)])
	clear(sc.rest[:cap(sc.rest)])
	clear(sc.pols[:cap(sc.pols)])
	clear(sc.args[:cap(sc.args)])
	clear(sc.cmds[:cap(sc.cmds)])
	scratchPool.Put(sc)
}

// split sorts items into those the batch script decides in one call and
// those that go by their own script: a multi-key call, an ASK redirection,
// a request the batch script could not serve, a script to EVAL. batched is
// nil when there are fewer than minBatch, or the store or node does not
// batch; the slices are sc's.
func (q *nodeQueue) split(items []*item, sc *scratch) (batched, rest []*item) {
	if q.s.cfg.PerKey || q.noBatch.Load() {
		return nil, items
	}
	n := 0
	for _, it := range items {
		if batchable(it) {
			n++
		}
	}
	if n < minBatch && (n < minBatchFunc || !q.useFunc()) {
		return nil, items
	}
	batched, rest = sc.batched[:0], sc.rest[:0]
	for _, it := range items {
		if batchable(it) {
			batched = append(batched, it)
		} else {
			rest = append(rest, it)
		}
	}
	sc.batched, sc.rest = batched, rest
	return batched, rest
}

func batchable(it *item) bool {
	return it.multi == nil && it.pa != nil && !it.ask && !it.alone && !it.eval
}

// batchCmd is the call of the batch for items: FCALL of lua.BatchLibrary
// when fcall is set (function.go), else of lua.Batch by EVALSHA, or EVAL
// when the node has not got the script. Each policy's numbers go once, in
// the table at the head of ARGV, and each item names its policy by index.
func batchCmd(ctx context.Context, items []*item, fcall, eval bool, sc *scratch) *redis.IntSliceCmd {
	// A batch holds few policies: a scan of them beats a map per batch.
	pols := sc.pols[:0]
	idx := slices.Grow(sc.idx[:0], len(items))[:len(items)]
	for i, it := range items {
		j := slices.Index(pols, it.pa)
		if j < 0 {
			j = len(pols)
			pols = append(pols, it.pa)
		}
		idx[i] = j + 1
	}
	args := slices.Grow(sc.args[:0], 4+4*len(pols)+lua.BatchItemArgs*len(items))
	switch {
	case fcall:
		args = append(args, "fcall", batchLibFunc, 0)
	case eval:
		args = append(args, "eval", batchSrc, 0)
	default:
		args = append(args, "evalsha", batchSHA, 0)
	}
	args = append(args, len(pols))
	for _, pa := range pols {
		args = append(args, pa.id, pa.limit, pa.rate, pa.unit)
	}
	for i, it := range items {
		args = append(args, it.key, idx[i], it.cost, it.opArg())
	}
	sc.pols, sc.idx, sc.args = pols, idx, args
	return redis.NewIntSliceCmd(ctx, args...)
}

// batchSHA and batchSrc are lua.Batch's, boxed once: boxing a string
// variable allocates.
var batchSHA, batchSrc any = lua.Batch.SHA, lua.Batch.Src

// fileBatch files the reply of a batch call (by FCALL when fcall is set):
// each item's decision, or a mark that sends it by its own script in the
// next pass. It reports whether the node answered, and whether it had no
// script (NOSCRIPT: the whole batch goes again by EVAL; "Function not
// found": again by FCALL after a FUNCTION LOAD; a node that cannot run
// functions: again by EVAL, and by the script from then on). Redis ran
// nothing of a call it answered so, and evalSent (the call was the EVAL,
// or followed a FUNCTION LOAD) stops a second round. An error reply other
// than those —
// READONLY from a demoted primary, a cluster that is down, a Redis without
// script flags — sends every item its own way, where MOVED, ASK and the
// connectivity list apply; a node that cannot run the script is not sent
// it again.
func (q *nodeQueue) fileBatch(cmd *redis.IntSliceCmd, items []*item, fcall, evalSent bool) (reached, noScript bool) {
	err := cmd.Err()
	if err != nil {
		q.s.observeErr(q.addr, err)
	}
	switch {
	case err == nil:
		v := cmd.Val()
		if len(v) != 8*len(items) {
			e := fmt.Errorf("cluster: unexpected batch script reply of %d integers for %d requests", len(v), len(items))
			for _, it := range items {
				it.res = limit.Result{Err: e}
			}
			return true, false
		}
		for i, it := range items {
			r := v[8*i : 8*i+8]
			if r[0] == 1 {
				q.decisions.Add(1)
				it.res = decodeInts(r[1:])
			} else {
				it.alone, it.again = true, true
			}
		}
		return true, false
	case fcall && funcNotFound(err) && !evalSent:
		q.fn.loaded.Store(false)
		for _, it := range items {
			it.again = true
		}
		return true, true
	case fcall && noFunctions(err):
		q.functionsOff(err)
		for _, it := range items {
			it.again = true
		}
		return true, true
	case !fcall && redis.HasErrorPrefix(err, "NOSCRIPT") && !evalSent:
		for _, it := range items {
			it.again = true
		}
		return true, true
	case isRedisReply(err):
		if unsupported(err) {
			q.noBatch.Store(true)
		}
		for _, it := range items {
			it.alone, it.again = true, true
		}
		return true, false
	case isConnectivity(err):
		e := q.s.unavailable(q.addr, err)
		for _, it := range items {
			it.res = limit.Result{Err: e}
		}
		return false, false
	}
	for _, it := range items {
		it.res = limit.Result{Err: fmt.Errorf("redis %s: %w", q.addr, err)}
	}
	return true, false
}

// unsupported reports whether err says the node cannot run the batch
// script at all: a Redis before 7.0 fails to compile its shebang line
// ("Error compiling script"), a later one may refuse the flag ("Unexpected
// flag in script shebang").
func unsupported(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return strings.Contains(msg, "Error compiling script") || strings.Contains(msg, "shebang")
}
