package cluster

import (
	"github.com/redis/go-redis/v9"
)

// link is one pipeline slot's connection to its node: a go-redis Conn, a
// connection of the node's client held for good, so that a pipeline
// neither checks a connection out of the pool nor back in. A checkout
// costs a health check, a recvfrom(MSG_PEEK) system call, on every
// pipeline; go-redis's TLS, AUTH, deadlines and reply parsing are the
// same on a Conn. A link is used by the holder of its slot alone.
//
// A connection that failed other than by an error reply — a timeout, a
// reset, EOF — may still carry the reply of a command whose caller gave
// up, so go-redis refuses to use it again; check closes it, and the next
// pipeline opens another (go-redis dials, with AUTH and TLS, on its first
// command).
type link struct {
	c    *redis.Conn // nil until the first pipeline, and after a failure
	lean *leanConn   // the same, when the store's pipelines are lean (conn.go)
}

// conn is l's connection, opened on client if l has none.
func (l *link) conn(client *redis.Client) *redis.Conn {
	if l.c == nil {
		l.c = client.Conn()
	}
	return l.c
}

// check closes l's connection when the pipeline that ended with err, of
// the batch command b (nil if none) and cmds, failed other than by an
// error reply.
func (l *link) check(err error, b *redis.IntSliceCmd, cmds []*redis.IntSliceCmd) {
	if err == nil || l.c == nil {
		return
	}
	bad := b != nil && broke(b.Err())
	for _, c := range cmds {
		bad = bad || broke(c.Err())
	}
	if bad || broke(err) {
		l.close()
	}
}

// close closes l's connection, if any.
func (l *link) close() {
	l.closeLean()
	if l.c != nil {
		_ = l.c.Close()
		l.c = nil
	}
}

// broke reports whether a command's err says its connection cannot be
// trusted again: any error but an error reply of Redis.
func broke(err error) bool {
	return err != nil && !isRedisReply(err)
}
