package server

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/limit"
)

// connState is the server's state for one client connection. The fields
// above the scratch slices may be read by other connections (CLIENT LIST) and
// are atomic; the rest belong to the connection's goroutine.
type connState struct {
	srv     *Server
	w       *redcon.Writer
	id      int64
	addr    string
	laddr   string
	created time.Time

	name    atomicString
	libName atomicString
	libVer  atomicString
	lastCmd atomic.Pointer[command]
	lastAt  atomic.Int64 // unix nanoseconds of the last pipeline

	authed bool
	quit   bool // QUIT ran: close after the replies

	// Scratch reused by every pipeline of this connection.
	cmds    []redcon.Command
	slots   []slot
	reqs    []limit.Request
	results []limit.Result
}

// atomicString is a string that other connections may read.
type atomicString = atomic.Pointer[string]

// slot is the pending reply of one command of a pipeline: a value or an
// error, or the index of its decision in results.
type slot struct {
	val any
	err error
	req int // index into reqs and results; -1 when val/err hold the reply
}

// maxScratch is the capacity above which a connection's scratch slices are
// dropped after a pipeline instead of being kept for the next one.
const maxScratch = 4096

func (s *Server) newConnState(w *redcon.Writer, addr, laddr string) *connState {
	now := time.Now()
	c := &connState{
		srv:     s,
		w:       w,
		id:      s.nextID.Add(1),
		addr:    addr,
		laddr:   laddr,
		created: now,
		authed:  s.cfg.RequirePass == "",
	}
	c.lastAt.Store(now.UnixNano())
	return c
}

// exec runs one pipeline: every command in order, the RL.TAKE and RL.PEEK
// requests of all of them in one Decide call, then every reply in order.
// It returns the number of replies written.
func (c *connState) exec(cmds []redcon.Command) (replies int) {
	c.slots = c.slots[:0]
	c.reqs = c.reqs[:0]
	decided := 0
	for i := range cmds {
		args := cmds[i].Args
		sl := slot{req: -1}
		cmd, err := c.resolve(args)
		if cmd != nil {
			c.lastCmd.Store(cmd)
		}
		switch {
		case err != nil:
			sl.err = err
		case cmd.batch != nil:
			req, err := cmd.batch(c, args)
			if err != nil {
				sl.err = err
			} else {
				sl.req = len(c.reqs)
				c.reqs = append(c.reqs, req)
			}
		default:
			if cmd.flags&flagBarrier != 0 {
				decided = c.decide(decided)
			}
			sl.val, sl.err = c.call(cmd, args)
		}
		c.slots = append(c.slots, sl)
		if c.quit {
			break
		}
	}
	c.decide(decided)

	errs := 0
	for i := range c.slots {
		sl := &c.slots[i]
		if sl.req < 0 {
			if reply(c.w, sl.val, sl.err) {
				errs++
			}
			continue
		}
		res := &c.results[sl.req]
		if res.Err != nil {
			reply(c.w, nil, &decisionError{key: c.reqs[sl.req].Key, err: res.Err})
			errs++
			continue
		}
		reply(c.w, res, nil)
	}
	replies = len(c.slots)
	c.lastAt.Store(time.Now().UnixNano())
	c.srv.commands.Add(int64(replies))
	if errs > 0 {
		c.srv.errReplies.Add(int64(errs))
	}
	c.release()
	return replies
}

// release drops what the finished pipeline referenced, so that command
// buffers and keys can be collected, and sheds oversized scratch.
func (c *connState) release() {
	clear(c.slots)
	clear(c.reqs)
	clear(c.results)
	clear(c.cmds)
	if cap(c.slots) > maxScratch {
		c.slots, c.reqs, c.results, c.cmds = nil, nil, nil, nil
	}
}

// decide sends the requests queued since index from to the Decider and
// returns the new count of decided requests.
func (c *connState) decide(from int) int {
	to := len(c.reqs)
	if from == to {
		return to
	}
	// results[:from] hold the decisions made before a barrier; keep them.
	c.results = slices.Grow(c.results[:from], to-from)[:to]
	out := c.results[from:to]
	clear(out)
	c.srv.decide(c.reqs[from:to], out)
	return to
}

// call runs a handler; a panic becomes ERR internal error.
func (c *connState) call(cmd *command, args [][]byte) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			c.srv.recovered(r, cmd.name)
			v, err = nil, errInternal
		}
	}()
	return cmd.run(c, args)
}

// decide calls the Decider; a panic fails the whole batch with ERR internal
// error, since which item caused it is unknown.
func (s *Server) decide(reqs []limit.Request, out []limit.Result) {
	defer func() {
		if r := recover(); r != nil {
			s.recovered(r, "decide")
			for i := range out {
				out[i] = limit.Result{Err: errInternal}
			}
		}
	}()
	s.cfg.Decider.Decide(s.ctx, reqs, out)
}
