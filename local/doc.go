// Package local is the in-process store: the same algorithms as the Lua
// scripts in package lua, in Go, with time passed in. It backs the embedded
// mode, the `local` failure fallback and, later, leased tokens.
//
// It must not talk to the network, and its decisions must agree exactly
// with the Lua scripts (the shared vectors in this package's tests check it).
package local
