// Package acl is sluice's users and their permissions, in the manner of
// Redis 6 ACL: who may authenticate with which password, which commands
// each user may run (by name or by category), and which keys each may
// touch.
//
// A List is an immutable value built once, by Parse from an ACL file in
// Redis's syntax or by FromFlags from --requirepass and --admin-pass, and
// shared by every door (RESP, HTTP, gRPC) through a Holder, which a reload
// swaps atomically. A door needs only a user name, a password, a
// lower-case command name ("rl.take", "rl.policy|set") and the keys:
// Authenticate, then (*User).Check.
//
// The command table of this package (categories.go) is the one place that
// says which category a command is in and whether it reads or writes its
// keys; the doors' own tables must name no command that it lacks.
//
// The package must not log, and nothing it formats (errors, Describe)
// contains a password; Describe shows SHA-256 digests, as Redis's ACL
// LIST does, and errors never repeat a password rule.
package acl
