// Package delayproxy is a small TCP proxy for loopback that adds a one-way
// delay to every byte in each direction, so that a round trip through it
// costs at least twice that delay: the distance between two regions on one
// machine, where netem is not available. It can also hold every byte
// (Stall: peers see timeouts, as in a partition) or reset every connection
// (Cut: peers see refused and reset connections, as when a link is torn
// down).
//
// The delay adds latency, not a throughput limit: every chunk read is
// stamped with the time it may leave and forwarded, in order, when that
// time comes, while reading goes on. What one connection holds is bounded
// (Config.MaxInFlight bytes per direction); when that is full the proxy
// stops reading, so a fast sender is slowed by TCP's own backpressure, not
// buffered without bound.
//
// ProxyCluster puts one proxy in front of every node of a localredis
// Cluster and makes the nodes announce the proxies' ports, so that a
// cluster client's CLUSTER SLOTS and MOVED lead it through the proxies.
//
// What it must not do: listen on or connect to anything but the addresses
// it is given (tests and labs give loopback ones), keep goroutines after
// Close, or hold more than MaxInFlight bytes per direction of a connection.
// Establishing a connection costs no delay (a real link would add a round
// trip per new connection); pooled clients barely notice.
package delayproxy
