// Package lua holds the Lua scripts that sluice runs on Redis, embedded from
// their .lua files. It holds nothing else: callers load and run them.
package lua
