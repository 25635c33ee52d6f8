// Package edge holds what every door of sluice (RESP, HTTP, Envoy's gRPC)
// applies at its edge alike: the bounds on headers, keys and connections,
// the cost and key checks, the constant-time password check. One rule is
// written once, so the doors cannot drift apart. It decides nothing,
// writes no reply (each door words its own, around these errors' texts)
// and imports nothing of sluice.
package edge
