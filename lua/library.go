package lua

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
)

// Library is a Redis Function library (Redis 7.0 and later): loaded once
// per node with FUNCTION LOAD, called with FCALL. Its top level — every
// algorithm's functions and their table — runs once, at load; a call runs
// only its callback, where a script (EVALSHA) builds all of it again on
// every call.
//
// Name and Func carry a hash of the code, so that an instance of another
// sluice never calls a library of the same name with another argument
// layout: a new build loads a new library beside the old ones (FUNCTION
// LOAD without REPLACE), and an old library, which nothing newer calls, is
// left until the node is flushed or restarted empty (docs/performance.md).
type Library struct {
	Name string // the library's name, sluice_<hash>
	Func string // the function FCALL names, sluice_<hash>_batch
	Src  string // FUNCTION LOAD's argument

	top, clock, main string // what it was built from
}

// libHashLen is the hex digits of the code's SHA1 in a library's name: 48
// bits, against the few builds a cluster ever sees.
const libHashLen = 12

// newLibrary builds a library whose one function, flagged
// allow-cross-slot-keys as the batch script, runs clock and main (a script
// body that reads KEYS, ARGV and now) with top (the algorithms) at the
// library's top level, where redis.call is not allowed: top only defines.
func newLibrary(top, clock, main string) *Library {
	body := top + "\nlocal function batch(KEYS, ARGV)\n" + clock + main + "end\n"
	sum := sha1.Sum([]byte(body))
	name := "sluice_" + hex.EncodeToString(sum[:])[:libHashLen]
	fn := name + "_batch"
	src := "#!lua name=" + name + "\n" + body +
		"redis.register_function{function_name = '" + fn + "', callback = batch, flags = {'allow-cross-slot-keys'}}\n"
	return &Library{Name: name, Func: fn, Src: src, top: top, clock: clock, main: main}
}

// BatchLibrary is Batch as a function: the same code, the same ARGV and
// reply (see Batch), called FCALL Func 0 ARGV….
var BatchLibrary = newLibrary(algorithms, clockLine, batchMain)

// WithTestClock returns the library with its clock read from its last two
// arguments (seconds, microseconds) instead of TIME, under a name of its
// own (the name hashes the code).
func (l *Library) WithTestClock() *Library {
	if strings.Count(l.clock, Clock) != 1 {
		panic(fmt.Sprintf("lua: %s must read the clock exactly once", l.Name))
	}
	return newLibrary(l.top, strings.Replace(l.clock, Clock, TestClock, 1), l.main)
}
