package cluster

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/lua"
)

// funcState is what a node queue knows of the batch library
// (lua.BatchLibrary) on its node. The batch goes by FCALL of the library
// while the node runs functions, else by EVALSHA of lua.Batch as before.
//
// A queue loads the library with the first batch it sends (FUNCTION LOAD
// in the same pipeline, before the FCALL), and again after the node
// answers "Function not found" (a restart empty, a failover onto a replica
// that missed the load, FUNCTION FLUSH): then only the batch call, which
// Redis did not run, goes again, in the next pass, after a FUNCTION LOAD;
// a call that timed out is never sent again (retry). A node that cannot
// run functions at all — a Redis before 7.0, FUNCTION or FCALL refused by
// its ACL or renamed — is told once (logged) and gets the batch script
// from then on.
type funcState struct {
	loaded atomic.Bool // the node has the library, as far as the queue knows
	off    atomic.Bool // the node cannot run functions: EVALSHA of lua.Batch
}

// The library's FUNCTION LOAD and FCALL arguments, boxed once.
var (
	batchLibSrc  any = lua.BatchLibrary.Src
	batchLibFunc any = lua.BatchLibrary.Func
)

// loadCmd returns the FUNCTION LOAD the pipeline about to carry a batch
// call must send before it, or nil: none when the node runs scripts
// instead, or has the library and did not say otherwise (reload). REPLACE
// makes a second load of the same library — by another worker, another
// sluice, a node that kept it — a success instead of an error reply; it
// never replaces other code, since the name is a hash of the code.
func (q *nodeQueue) loadCmd(ctx context.Context, reload bool) *redis.StringCmd {
	if q.fn.loaded.Load() && !reload {
		return nil
	}
	return redis.NewStringCmd(ctx, "function", "load", "replace", batchLibSrc)
}

// useFunc reports whether the batch goes by FCALL to the node.
func (q *nodeQueue) useFunc() bool { return !q.fn.off.Load() }

// fileLoad files the reply to a FUNCTION LOAD: the library is there, or the
// node cannot run functions (then off), or it could not load it now (a
// demoted primary, out of memory: the FCALL after it answers and is filed
// as usual).
func (q *nodeQueue) fileLoad(cmd *redis.StringCmd) {
	err := cmd.Err()
	switch {
	case err == nil:
		q.fn.loaded.Store(true)
	case noFunctions(err):
		q.functionsOff(err)
	}
}

// functionsOff turns the node's batch over to the batch script, once.
func (q *nodeQueue) functionsOff(err error) {
	if q.fn.off.CompareAndSwap(false, true) {
		log := q.s.cfg.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("cluster: the node cannot run Redis Functions; its batches go by EVALSHA of the batch script",
			"node", q.addr, "library", lua.BatchLibrary.Name, "err", err)
	}
}

// funcNotFound reports whether err is FCALL's answer for a function the
// node does not have (the library is not loaded there).
func funcNotFound(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "ERR Function not found")
}

// noFunctions reports whether err, the answer to FUNCTION LOAD or FCALL,
// says the node cannot run functions at all: an unknown command (a Redis
// before 7.0, or the command renamed away), a command the user's ACL
// refuses, a library the node cannot compile or register.
func noFunctions(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	switch {
	case strings.HasPrefix(msg, "NOPERM"):
		return true
	case strings.HasPrefix(msg, "ERR unknown command"), strings.HasPrefix(msg, "ERR unknown subcommand"):
		return true
	case strings.HasPrefix(msg, "ERR Error compiling function"), strings.HasPrefix(msg, "ERR Error registering functions"):
		return true
	}
	return false
}
