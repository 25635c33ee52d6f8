// Package algotest holds the one table of test vectors that every
// implementation of an algorithm runs: the Go code in package local and the
// Lua scripts on a real Redis. It is imported only by tests.
package algotest
