package policy

import "sync/atomic"

// Holder holds the current Set and swaps it on reload. Its methods are safe
// for concurrent use; Current is lock-free, for the request path.
type Holder struct {
	cur atomic.Pointer[Set]
}

// NewHolder returns a Holder of initial; nil means Default().
func NewHolder(initial *Set) *Holder {
	if initial == nil {
		initial = Default()
	}
	h := &Holder{}
	h.cur.Store(initial)
	return h
}

// Current returns the Set in force. It never returns nil.
func (h *Holder) Current() *Set { return h.cur.Load() }

// Store makes s the Set in force; nil is ignored.
func (h *Holder) Store(s *Set) {
	if s != nil {
		h.cur.Store(s)
	}
}

// Reload loads the config at path and, if it is valid, makes it the Set in
// force and returns it. On error the last good Set stays in force and the
// error, which names the file, policy and field, is returned for the caller
// to log. Reloads that overlap each other are not serialised: the last
// to finish wins.
func (h *Holder) Reload(path string) (*Set, error) {
	s, err := Load(path)
	if err != nil {
		return nil, err
	}
	h.cur.Store(s)
	return s, nil
}
