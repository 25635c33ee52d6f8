package policy

import (
	"sync"
	"sync/atomic"
)

// Holder holds the current Set and swaps it on reload. Its methods are safe
// for concurrent use; Current is lock-free, for the request path.
type Holder struct {
	cur atomic.Pointer[Set]

	mu       sync.Mutex // held by each change: its hook runs, then it is in force
	changing func()     // OnChange's; nil: none
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

// OnChange makes f the hook of every change of the Set in force (every
// path goes through Store: a reload, RL.POLICY SET or DEL here or on
// another instance, SIGHUP, the config watch). f runs before the new Set
// is in force, so the first request matched under it comes after f; what
// was decided or claimed under the policies in force (the deny cache's
// refusals, leased tokens) is dropped there. Changes run one after the
// other, each with its f, so f need not be safe for concurrent use with
// itself. A Store of the Set already in force calls nothing. nil removes
// the hook.
func (h *Holder) OnChange(f func()) {
	h.mu.Lock()
	h.changing = f
	h.mu.Unlock()
}

// Store makes s the Set in force, after the OnChange hook; nil is ignored.
func (h *Holder) Store(s *Set) {
	if s == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.changing != nil && s != h.cur.Load() {
		h.changing()
	}
	h.cur.Store(s)
}

// Reload loads the config at path and, if it is valid, makes it the Set in
// force (by Store) and returns it. On error the last good Set stays in
// force and the error, which names the file, policy and field, is returned
// for the caller to log. Reloads that overlap each other are not
// serialised: the last to finish wins.
func (h *Holder) Reload(path string) (*Set, error) {
	s, err := Load(path)
	if err != nil {
		return nil, err
	}
	h.Store(s)
	return s, nil
}
