package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// ErrClosed is the error of a request to a Store after Close: a fault of
// the caller, not a Redis outage, so it is never limit.ErrUnavailable.
var ErrClosed = errors.New("cluster: store closed")

var errNoScriptTwice = errors.New("cluster: NOSCRIPT after EVAL")

// errNoReply is the error of a command that NOSCRIPT sent back for EVAL
// while the rest of its pipeline found the node unreachable.
var errNoReply = errors.New("node stopped answering before the script could be loaded")

// errRedirectLoop is the error of a request still sent from node to node by
// MOVED when its deadline came: during a slot move, two nodes that each
// name the other as the owner, for longer than the deadline.
var errRedirectLoop = errors.New("redirected back and forth between nodes that disagree on the slot's owner until the deadline")

// isConnectivity reports whether err says that the node could not answer
// now, rather than that it answered with something wrong. It is a positive
// list: the network (refused, reset, EOF, timeouts, no route), the deadline,
// a full connection pool, and the error replies of a node or cluster
// between states: CLUSTERDOWN, TRYAGAIN, LOADING, MASTERDOWN, READONLY,
// BUSY (a script past its time limit: the node answers nothing else until
// it ends, as while LOADING) and "max number of clients reached". Anything
// else — another error reply, a reply that does not parse, a closed client —
// is a bug to surface, not a reason for on_store_error.
func isConnectivity(err error) bool {
	if err == nil {
		return false
	}
	if isRedisReply(err) {
		return redis.IsClusterDownError(err) || redis.IsTryAgainError(err) || redis.IsLoadingError(err) ||
			redis.IsMasterDownError(err) || redis.IsReadOnlyError(err) || redis.HasErrorPrefix(err, "BUSY") ||
			redis.IsMaxClientsError(err)
	}
	switch {
	case errors.Is(err, redis.ErrClosed), errors.Is(err, ErrClosed):
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return true
	}
	var ne net.Error // dial, read and write errors, timeouts, DNS
	return errors.As(err, &ne)
}

// isRedisReply reports whether err is an error reply of Redis.
func isRedisReply(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}
