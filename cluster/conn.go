package cluster

import (
	"bufio"
	"context"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// leanConn is a pipeline slot's own connection to its node (docs/performance.md,
// "A lean connection for the pipelines"): a net.Conn dialled as go-redis
// would dial it — the node client's dialer, so TLS and the late-read peek
// (overload_read.go) are the same — and authenticated as go-redis would
// (AUTH with the client's username and password, SELECT of its database,
// CLIENT SETNAME of its name), over which a pipeline is written from the
// commands' argument slices into one reused buffer, in one write, and its
// replies are read by a parser of just the shapes the store's commands get
// (connproto.go). go-redis keeps everything else: the slot map, MOVED and
// ASK (the lean connection returns them as error replies, to the same
// redirect path), Sentinel, and every command off the hot path.
//
// A lean connection is used by the holder of its slot alone. Every
// pipeline sets its own deadlines: the write's and the read's are the
// earlier of the pipeline's deadline and now plus the client's
// WriteTimeout and ReadTimeout, as go-redis's ContextTimeoutEnabled does.
// A connection that met anything but an error reply — a timeout, a reset,
// EOF, a reply it cannot parse — is closed and never used again: the reply
// of a command whose caller gave up may still be on its way, and must
// never be read as the next pipeline's.
type leanConn struct {
	nc  net.Conn
	r   *bufio.Reader
	buf []byte // the pipeline being written, kept for the next
	// readTimeout and writeTimeout bound each pipeline's read and write
	// (the client's ReadTimeout and WriteTimeout: MaxTimeout).
	readTimeout, writeTimeout time.Duration
	// cmds hold the replies of a pipeline's commands (file and fileBatch
	// read them), reused from one pipeline to the next with their slices.
	cmds []*redis.IntSliceCmd
	// batch is the integers of the batch script's reply, reused likewise
	// (fileBatch reads them before the pipeline returns).
	batch []int64
	// closeReg takes the connection out of the store's register of open
	// connections (closed by Store.Close).
	closeReg func()
}

// leanReadBuffer is the reader's buffer, which bounds a reply line: an
// error reply of a script may name its file and line, nothing longer.
const leanReadBuffer = 16 << 10

// maxLeanBuffer bounds the write buffer a connection keeps for the next
// pipeline: a rare huge one is left to the collector.
const maxLeanBuffer = 1 << 20

// maxReplyReuse bounds the integers of a reply buffer kept for the next
// pipeline.
const maxReplyReuse = 1 << 14

// askingCmd is ASKING in RESP, sent before the command of a key its node
// is importing (ASK).
var askingCmd = []byte("*1\r\n$6\r\nasking\r\n")

// leanable reports whether the store's pipelines may use lean connections
// on a client with options o: not when its credentials come from a
// provider (sluice sets none; go-redis alone knows how to refresh them).
func leanable(o *redis.Options) bool {
	return o.CredentialsProvider == nil && o.CredentialsProviderContext == nil && o.StreamingCredentialsProvider == nil
}

// dialLean opens a lean connection to the node of client, by deadline at
// the latest: dial, then AUTH, SELECT and CLIENT SETNAME as the client's
// options ask, in one round trip. An error reply to any of them (WRONGPASS,
// NOAUTH…) is returned as it is, a redis.Error, and the connection is
// closed.
func dialLean(ctx context.Context, o *redis.Options, deadline time.Time) (*leanConn, error) {
	now := time.Now()
	dctx, cancel := context.WithDeadline(ctx, earliest(deadline, now, o.DialTimeout))
	defer cancel()
	dial := o.Dialer // newClient's: watchReads over go-redis's dialer, with its TLS
	if dial == nil {
		dial = redis.NewDialer(o)
	}
	nc, err := dial(dctx, o.Network, o.Addr)
	if err != nil {
		return nil, err
	}
	c := &leanConn{nc: nc, r: bufio.NewReaderSize(nc, leanReadBuffer), readTimeout: o.ReadTimeout, writeTimeout: o.WriteTimeout}
	n := 0
	if o.Password != "" {
		if o.Username != "" {
			c.buf, _ = appendCommand(c.buf, []any{"auth", o.Username, o.Password})
		} else {
			c.buf, _ = appendCommand(c.buf, []any{"auth", o.Password})
		}
		n++
	}
	if o.DB > 0 {
		c.buf, _ = appendCommand(c.buf, []any{"select", o.DB})
		n++
	}
	if o.ClientName != "" {
		c.buf, _ = appendCommand(c.buf, []any{"client", "setname", o.ClientName})
		n++
	}
	if n == 0 {
		return c, nil
	}
	if err := c.write(deadline); err != nil {
		c.close()
		return nil, err
	}
	c.setReadDeadline(deadline)
	var first error
	for range n {
		if err := readStatus(c.r); err != nil {
			if !isRedisReply(err) {
				c.close()
				return nil, err
			}
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		c.close()
		return nil, first
	}
	return c, nil
}

// earliest is the earlier of deadline and now plus d (d ≤ 0: deadline).
func earliest(deadline, now time.Time, d time.Duration) time.Time {
	if d > 0 && (deadline.IsZero() || now.Add(d).Before(deadline)) {
		return now.Add(d)
	}
	return deadline
}

// write writes c.buf, by the earlier of deadline and the write timeout.
func (c *leanConn) write(deadline time.Time) error {
	if err := c.nc.SetWriteDeadline(earliest(deadline, time.Now(), c.writeTimeout)); err != nil {
		return err
	}
	_, err := c.nc.Write(c.buf)
	if cap(c.buf) > maxLeanBuffer {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	return err
}

func (c *leanConn) setReadDeadline(deadline time.Time) {
	_ = c.nc.SetReadDeadline(earliest(deadline, time.Now(), c.readTimeout))
}

func (c *leanConn) close() {
	_ = c.nc.Close()
	if c.closeReg != nil {
		c.closeReg()
	}
}

// cmd is the i-th reply holder of a pipeline, its error cleared. (A
// holder's context is never read: the lean connection sets its own
// deadlines.)
func (c *leanConn) cmd(i int) *redis.IntSliceCmd {
	for len(c.cmds) <= i {
		c.cmds = append(c.cmds, redis.NewIntSliceCmd(context.Background()))
	}
	cmd := c.cmds[i]
	cmd.SetErr(nil)
	return cmd
}

// leanConn is l's lean connection, dialled if l has none; nil and the
// error when it cannot be opened (or the store is closed).
func (l *link) leanConn(ctx context.Context, q *nodeQueue) (*leanConn, error) {
	if l.lean != nil {
		return l.lean, nil
	}
	if q.s.closed.Load() {
		return nil, ErrClosed
	}
	d, _ := ctx.Deadline()
	c, err := dialLean(ctx, q.client.Options(), d)
	if err != nil {
		return nil, err
	}
	if !q.s.register(c) {
		c.close()
		return nil, ErrClosed
	}
	l.lean = c
	return c, nil
}

// pipelined sends, in one round trip on l, the batch script call b (nil
// when none) and the own script of each item of rest (ASKING first where
// it.ask), and leaves the replies in b and cmds, one per item of rest. On
// a lean connection cmds[i] are the connection's reply holders; otherwise
// go-redis's Pipelined runs on the slot's go-redis Conn. It returns the
// first error, as Pipelined does; the lean connection is already closed
// when that error is not an error reply.
func (l *link) pipelined(ctx context.Context, q *nodeQueue, load *redis.StringCmd, b *redis.IntSliceCmd, rest []*item, cmds []*redis.IntSliceCmd) error {
	if !q.s.lean {
		return l.pipelinedGoRedis(ctx, q, load, b, rest, cmds)
	}
	c, err := l.leanConn(ctx, q)
	if err != nil {
		for i := range rest { // rare: fresh holders for the error
			cmds[i] = redis.NewIntSliceCmd(ctx)
		}
		failLoad(err, load)
		failCmds(err, b, cmds)
		return err
	}
	for i := range rest {
		cmds[i] = c.cmd(i)
	}
	if err := c.appendPipeline(load, b, rest); err != nil {
		failLoad(err, load)
		failCmds(err, b, cmds)
		return err
	}
	d, _ := ctx.Deadline()
	if err := c.write(d); err != nil {
		l.closeLean()
		failLoad(err, load)
		failCmds(err, b, cmds)
		return err
	}
	c.setReadDeadline(d)
	return l.readPipeline(c, load, b, rest, cmds)
}

// pipelinedGoRedis is pipelined through go-redis's Pipelined, on the
// slot's go-redis Conn.
func (l *link) pipelinedGoRedis(ctx context.Context, q *nodeQueue, load *redis.StringCmd, b *redis.IntSliceCmd, rest []*item, cmds []*redis.IntSliceCmd) error {
	_, err := l.conn(q.client).Pipelined(ctx, func(p redis.Pipeliner) error {
		if load != nil {
			_ = p.Process(ctx, load)
		}
		if b != nil {
			_ = p.Process(ctx, b)
		}
		for i, it := range rest {
			if it.ask {
				_ = p.Process(ctx, redis.NewCmd(ctx, "asking"))
			}
			cmds[i] = redis.NewIntSliceCmd(ctx, it.command(it.eval)...)
			_ = p.Process(ctx, cmds[i])
		}
		return nil
	})
	return err
}

// appendPipeline writes the pipeline's commands into c's buffer: the
// FUNCTION LOAD and the batch call when not nil, then each item's own
// script (ASKING first where it.ask). On an error the buffer is emptied.
func (c *leanConn) appendPipeline(load *redis.StringCmd, b *redis.IntSliceCmd, rest []*item) error {
	var err error
	if load != nil {
		c.buf, err = appendCommand(c.buf, load.Args())
	}
	if b != nil && err == nil {
		c.buf, err = appendCommand(c.buf, b.Args())
	}
	for _, it := range rest {
		if err != nil {
			break
		}
		if it.ask {
			c.buf = append(c.buf, askingCmd...)
		}
		c.buf, err = appendCommand(c.buf, it.command(it.eval))
	}
	if err != nil {
		c.buf = c.buf[:0]
	}
	return err
}

// readPipeline reads the replies of what appendPipeline wrote, in order,
// into load, b and cmds, and returns the first error; a failure that is
// not an error reply closes the connection and fails what is left.
func (l *link) readPipeline(c *leanConn, load *redis.StringCmd, b *redis.IntSliceCmd, rest []*item, cmds []*redis.IntSliceCmd) error {
	var first error
	broken := func(err error) error {
		l.closeLean()
		return err
	}
	if load != nil {
		name, err := readBulk(c.r)
		load.SetVal(name)
		load.SetErr(err)
		if err != nil && !isRedisReply(err) {
			failCmds(broken(err), b, cmds)
			return err
		}
		first = err
	}
	if b != nil {
		v, err := readInts(c.r, c.batch)
		c.batch = v[:0]
		if cap(v) > maxReplyReuse {
			c.batch = nil
		}
		b.SetVal(v)
		b.SetErr(err)
		if err != nil && !isRedisReply(err) {
			failCmds(broken(err), nil, cmds)
			return err
		}
		if first == nil {
			first = err
		}
	}
	for i, it := range rest {
		if it.ask {
			if err := readStatus(c.r); err != nil && !isRedisReply(err) {
				failCmds(broken(err), nil, cmds[i:])
				return err
			}
		}
		v, err := readInts(c.r, cmds[i].Val())
		cmds[i].SetVal(v)
		cmds[i].SetErr(err)
		if err != nil && !isRedisReply(err) {
			failCmds(broken(err), nil, cmds[i+1:])
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// failLoad gives err to load, the pipeline's FUNCTION LOAD, when there is one.
func failLoad(err error, load *redis.StringCmd) {
	if load != nil {
		load.SetErr(err)
	}
}

// failCmds gives err to b (when not nil) and every command of cmds.
func failCmds(err error, b *redis.IntSliceCmd, cmds []*redis.IntSliceCmd) {
	if b != nil {
		b.SetErr(err)
	}
	for _, c := range cmds {
		c.SetErr(err)
	}
}

// open reports whether l has a connection to send WAIT on: its pipeline
// did not break it.
func (l *link) open() bool { return l.lean != nil || l.c != nil }

// wait sends WAIT numreplicas ms on l's connection, the one the pipeline
// wrote on, and returns Redis's count of replicas that acknowledged. A
// failure other than an error reply closes the connection.
func (l *link) wait(ctx context.Context, replicas, ms int64) (int64, error) {
	if l.lean == nil {
		w := redis.NewIntCmd(ctx, "wait", replicas, ms)
		err := l.c.Process(ctx, w)
		if broke(err) {
			l.close()
		}
		return w.Val(), err
	}
	c := l.lean
	c.buf, _ = appendCommand(c.buf, []any{"wait", replicas, ms})
	d, _ := ctx.Deadline()
	if err := c.write(d); err != nil {
		l.closeLean()
		return 0, err
	}
	c.setReadDeadline(d)
	n, err := readInt(c.r)
	if err != nil && !isRedisReply(err) {
		l.closeLean()
	}
	return n, err
}

// closeLean closes l's lean connection, if any.
func (l *link) closeLean() {
	if l.lean != nil {
		l.lean.close()
		l.lean = nil
	}
}

// closeLinks closes the connections of q's pipeline slots that are free
// (all of them once its workers have stopped: stopQueue).
func (q *nodeQueue) closeLinks() {
	for range cap(q.slots) {
		select {
		case l := <-q.slots:
			l.close()
			defer func() { q.slots <- l }()
		default:
			return
		}
	}
}

// register adds c to the store's open lean connections, which Close
// closes; false when the store is closed already.
func (s *Store) register(c *leanConn) bool {
	s.leans.Store(c, struct{}{})
	c.closeReg = func() { s.leans.Delete(c) }
	return !s.closed.Load() // Close sets closed before it closes the registered
}

// closeLeans closes every lean connection still open: a pipeline that
// uses one meanwhile fails as on a reset connection, and closes its link.
func (s *Store) closeLeans() {
	s.leans.Range(func(k, _ any) bool {
		_ = k.(*leanConn).nc.Close()
		return true
	})
}
