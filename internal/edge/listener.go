package edge

import (
	"net"

	"golang.org/x/net/netutil"
)

// LimitConnections returns ln serving at most n connections at once: past
// n, a new connection waits in the listen backlog until one closes, so a
// flood of connections costs the kernel's backlog, not goroutines and
// buffers (the HTTP and gRPC doors; RESP answers its own error instead).
func LimitConnections(ln net.Listener, n int) net.Listener {
	return netutil.LimitListener(ln, n)
}
