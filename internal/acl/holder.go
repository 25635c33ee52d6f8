package acl

import "sync/atomic"

// Holder is the List in force, shared by every door, and the Log of what
// they refused. A reload stores a new List; a door loads it per request
// (or, for a connection that stays authenticated, per command), so changed
// permissions apply at once. Its methods are safe for concurrent use.
type Holder struct {
	list atomic.Pointer[List]
	log  *Log
}

// NewHolder returns a Holder of l with an empty Log of DefaultLogLen
// entries.
func NewHolder(l *List) *Holder {
	h := &Holder{log: NewLog(DefaultLogLen)}
	h.list.Store(l)
	return h
}

// Users returns the List in force.
func (h *Holder) Users() *List { return h.list.Load() }

// Store puts l in force.
func (h *Holder) Store(l *List) { h.list.Store(l) }

// Log returns the log of refusals that every door adds to.
func (h *Holder) Log() *Log { return h.log }
