package server

import (
	"io"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluice-rl/sluice/internal/acl"
	"github.com/sluice-rl/sluice/limit"
)

// connState is the server's state for one client connection. The fields
// above the scratch slices may be read by other connections (CLIENT LIST) and
// are atomic; the rest belong to the connection's goroutine.
type connState struct {
	srv     *Server
	w       io.Writer // the connection; replies bypass redcon's writer
	id      int64
	addr    string
	laddr   string
	created time.Time

	name    atomicString
	libName atomicString
	libVer  atomicString
	lastCmd atomic.Pointer[command]
	lastAt  atomic.Int64             // unix nanoseconds of the last pipeline
	user    atomic.Pointer[acl.User] // the user in force; nil: must authenticate (auth.go)
	resp3   atomic.Bool              // HELLO 3 is in force: replies are RESP3 (reply.go)

	authed   bool      // AUTH succeeded, as authName
	authName string    // the user AUTH named
	users    *acl.List // the list user was taken from
	quit     bool      // QUIT ran: close after the replies
	werr     error     // the write that failed; the connection is to be closed

	// out holds the replies not yet written: at most about MaxOutputBytes
	// plus one reply, since exec writes it out whenever it grows past that.
	out []byte

	// Scratch reused by every pipeline of this connection.
	slots   []slot
	reqs    []limit.Request
	results []limit.Result
}

// atomicString is a string that other connections may read.
type atomicString = atomic.Pointer[string]

// slot is the pending reply of one command of a pipeline: a value or an
// error, or the index of its decision in results.
type slot struct {
	val   any
	err   error
	req   int  // index into reqs and results; -1 when val/err hold the reply
	cell  bool // reply as CL.THROTTLE does
	resp3 bool // val in RESP3: the protocol in force after its command ran
}

// maxScratch is the capacity above which a connection's scratch slices are
// dropped after a pipeline instead of being kept for the next one.
const maxScratch = 4096

func (s *Server) newConnState(w io.Writer, addr, laddr string) *connState {
	now := time.Now()
	c := &connState{
		srv:     s,
		w:       w,
		id:      s.nextID.Add(1),
		addr:    addr,
		laddr:   laddr,
		created: now,
	}
	c.lastAt.Store(now.UnixNano())
	return c
}

// exec runs one pipeline: every command in order, the RL.TAKE and RL.PEEK
// requests of all of them in one Decide call, then every reply in order.
// It returns the number of replies made. Replies are left in c.out for
// flush, except that whenever c.out exceeds MaxOutputBytes it is written out
// at once, so a pipeline of large replies never buffers more than that.
func (c *connState) exec(cmds [][][]byte) (replies int) {
	c.slots = c.slots[:0]
	c.reqs = c.reqs[:0]
	decided := 0
	for i := range cmds {
		args := cmds[i]
		sl := slot{req: -1}
		cmd, err := c.resolve(args)
		if cmd != nil && c.lastCmd.Load() != cmd {
			// A pipeline of one command stores it once, not once each.
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
				sl.cell = cmd.flags&flagCellReply != 0
				c.reqs = append(c.reqs, req)
			}
		default:
			if cmd.flags&flagBarrier != 0 {
				decided = c.decide(decided)
			}
			sl.val, sl.err = c.call(cmd, args)
			// HELLO answers in the protocol it chose, and a command after it
			// in the same pipeline in that one too.
			sl.resp3 = c.resp3.Load()
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
		var bad bool
		switch {
		case sl.req < 0:
			c.out, bad = reply(c.out, sl.val, sl.err, sl.resp3)
		case c.results[sl.req].Err != nil:
			c.out, bad = reply(c.out, nil, &decisionError{key: c.reqs[sl.req].Key, err: c.results[sl.req].Err}, false)
		case sl.cell:
			c.out, bad = reply(c.out, cellReply(&c.results[sl.req]), nil, false)
		case c.reqs[sl.req].WantReceipt:
			c.out = appendReceipted(c.out, &c.results[sl.req])
		default:
			c.out, bad = reply(c.out, &c.results[sl.req], nil, false)
		}
		if bad {
			errs++
		}
		if len(c.out) > c.srv.cfg.MaxOutputBytes {
			c.flush()
		}
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

// flush writes out the replies in c.out. A failed write (the client is gone,
// or did not take the bytes within WriteTimeout) is kept in c.werr and makes
// later flushes drop their replies; the caller closes the connection.
func (c *connState) flush() {
	if len(c.out) > 0 && c.werr == nil {
		_, c.werr = c.w.Write(c.out)
	}
	c.out = c.out[:0]
	if cap(c.out) > maxOutScratch {
		c.out = nil
	}
}

// maxOutScratch is the capacity above which a connection's reply buffer is
// dropped after a write instead of being kept, so that an idle connection
// holds no more than this of it.
const maxOutScratch = 16 << 10

// release drops what the finished pipeline referenced, so that command
// buffers and keys can be collected, and sheds oversized scratch.
func (c *connState) release() {
	clear(c.slots)
	clear(c.reqs)
	clear(c.results)
	if cap(c.slots) > maxScratch {
		c.slots, c.reqs, c.results = nil, nil, nil
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
