package cluster

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
)

// Observer is told of the Store's round trips and failed commands, for
// metrics. Its methods are called from the node workers, concurrently and
// on the hot path: they must be fast and must not block.
type Observer interface {
	// Pipeline reports one pipeline round trip to node (host:port) that
	// carried commands script calls and took d, answered or not.
	Pipeline(node string, d time.Duration, commands int)
	// Error reports one command to node that failed or was sent back, by
	// kind: one of the Kind constants.
	Error(node, kind string)
}

// The kinds of Observer.Error.
const (
	KindTimeout     = "timeout"      // the deadline passed, before sending or waiting for the reply
	KindConnection  = "connection"   // refused, reset, EOF, no route: the node is unreachable
	KindClusterDown = "cluster_down" // CLUSTERDOWN, LOADING, MASTERDOWN, READONLY, BUSY, max clients: the node cannot serve now
	KindTryAgain    = "tryagain"     // TRYAGAIN: a slot is migrating
	KindRedirect    = "moved_ask"    // MOVED or ASK: sent to another node
	KindNoScript    = "noscript"     // NOSCRIPT or "Function not found": the script or library is loaded and the command sent again
	KindBreakerOpen = "breaker_open" // not sent: the node's circuit breaker is open
	KindOverload    = "overload"     // not sent, or late: the node answers, but its queue would outlast the deadline
	KindUnacked     = "unacked"      // a durable spend no replica acknowledged in time (WAIT): answered by on_store_error
	KindRedisError  = "redis_error"  // any other error: an error reply, a reply that does not parse, a closed client: a bug to surface
)

// errKind classifies an error of one command.
func errKind(err error) string {
	switch {
	case errors.Is(err, ErrCircuitOpen):
		return KindBreakerOpen
	case errors.Is(err, ErrNotReplicated):
		return KindUnacked
	case redis.HasErrorPrefix(err, "NOSCRIPT"), funcNotFound(err):
		return KindNoScript
	case redis.IsClusterDownError(err):
		return KindClusterDown
	case redis.IsTryAgainError(err):
		return KindTryAgain
	}
	if _, ok := redis.IsMovedError(err); ok {
		return KindRedirect
	}
	if _, ok := redis.IsAskError(err); ok {
		return KindRedirect
	}
	if isConnectivity(err) {
		if isRedisReply(err) {
			return KindClusterDown
		}
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
			(errors.As(err, &ne) && ne.Timeout()) {
			return KindTimeout
		}
		return KindConnection
	}
	return KindRedisError
}

// observeErr reports err, a failure of one command to addr, if anyone
// listens.
func (s *Store) observeErr(addr string, err error) {
	if s.cfg.Observer != nil {
		s.cfg.Observer.Error(addr, errKind(err))
	}
}
