package envoycfg

import (
	"sync/atomic"

	"github.com/sluice-rl/sluice/limit"
)

// Holder holds the Config in force and swaps it on reload. Its methods are
// safe for concurrent use and lock-free on the request path. The zero
// Holder holds no config: nothing matches.
type Holder struct {
	cur atomic.Pointer[Config]
}

// NewHolder returns a Holder of c (nil: no config).
func NewHolder(c *Config) *Holder {
	h := &Holder{}
	if c != nil {
		h.cur.Store(c)
	}
	return h
}

// Current returns the Config in force; nil when none was loaded.
func (h *Holder) Current() *Config { return h.cur.Load() }

// Match is Config.Match on the Config in force.
func (h *Holder) Match(domain string, entries []Entry) (*limit.Policy, bool) {
	return h.cur.Load().Match(domain, entries)
}

// Lookup is Config.Lookup on the Config in force.
func (h *Holder) Lookup(domain string, entries []Entry) Hit {
	return h.cur.Load().Lookup(domain, entries)
}

// LookupRequest is Config.LookupRequest on the Config in force, one Config
// for the whole request even when a reload lands meanwhile.
func (h *Holder) LookupRequest(domain string, descriptors [][]Entry) []Hit {
	return h.cur.Load().LookupRequest(domain, descriptors)
}

// Reload loads dir and, when it is valid, puts it in force. On error the
// last good Config stays in force and the error, which names every
// problem's file and path, is returned for the caller to log. Reloads that
// overlap are not serialised: the last to finish wins.
func (h *Holder) Reload(dir string) error {
	c, err := LoadDir(dir)
	if err != nil {
		return err
	}
	h.cur.Store(c)
	return nil
}
