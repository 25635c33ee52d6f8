// Package layercheck is the cross-layer checker of issue 20: a stateful
// property test (pgregory.net/rapid) that drives two or more real sluice
// processes in front of a real Redis Cluster, through every door and every
// layer that writes Redis state (the four algorithms, hot keys in lease and
// split mode, RL.MTAKE, CL.THROTTLE, shadow policies, runtime policies,
// SIGHUP reloads, a global policy in a region), and checks DESIGN.md's
// invariant from the replies alone: per user key, admitted over any
// interval T is at most limit + rate × T (windows: limit per window).
//
// The non-test code is the bookkeeping: what was admitted when (Log), which
// policy variants were in force when (Tracker), and Check, which turns them
// into violations. It never talks to Redis or sluice; the test does.
package layercheck
