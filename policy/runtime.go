package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// Backend stores the runtime policies (RL.POLICY SET) that every sluice
// instance in front of one store shares: a Redis hash and a Pub/Sub channel
// in cluster/, a map in this package for the embedded store.
type Backend interface {
	// Load returns every runtime policy: name → JSON.
	Load(ctx context.Context) (map[string]string, error)
	// Put stores one policy and tells the other instances.
	Put(ctx context.Context, name, data string) error
	// Delete removes one policy, tells the other instances, and reports
	// whether it existed.
	Delete(ctx context.Context, name string) (bool, error)
	// Watch calls changed whenever another instance may have changed the
	// policies, until ctx ends. Messages can be missed (a reconnect); the
	// periodic Sync heals that.
	Watch(ctx context.Context, changed func())
}

// Runtime combines the file's policies with the runtime ones and keeps
// the Holder's Set up to date as either changes. Runtime policies come
// first, in name order, so they can override a file policy's keys; one
// named like a file policy replaces it. Its methods are safe for
// concurrent use.
type Runtime struct {
	h       *Holder
	backend Backend
	// OnApply, if set, is told when runtime policies changed the Set in
	// force (err nil), and once per distinct error while they cannot (the
	// backend unreachable, a stored policy invalid). Set it before Run.
	OnApply func(source string, err error)
	// Check, if set, is what the store in use asks of every policy put in
	// force by SetFile or Set beyond the config's own rules (the embedded
	// store refuses durability: replica): an error names the field and is
	// reported as the policy's. Set it before the first SetFile or Set.
	Check func(p *limit.Policy) (field string, err error)

	mu      sync.Mutex
	file    *Set
	raw     map[string]string // the runtime policies in force, as stored
	applied string            // fingerprint of raw
}

// NewRuntime starts from file alone; Sync or Run bring in the backend's.
func NewRuntime(h *Holder, file *Set, b Backend) *Runtime {
	r := &Runtime{h: h, backend: b, file: file, raw: map[string]string{}}
	h.Store(file)
	return r
}

// Info is one policy in force, for RL.POLICY LIST.
type Info struct {
	Name, Source string // Source: "runtime", or the file, or "built-in"
	Hot          string // the hot block in force, as DescribeHot writes it
}

// List returns the policies in force in match order.
func (r *Runtime) List() []Info {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.h.Current()
	out := make([]Info, len(cur.Policies))
	for i, p := range cur.Policies {
		src := r.file.Source
		if _, ok := r.raw[p.Name]; ok {
			src = "runtime"
		}
		out[i] = Info{Name: p.Name, Source: src, Hot: DescribeHot(p)}
	}
	return out
}

// Get returns the policy in force called name as JSON, the form RL.POLICY
// SET takes.
func (r *Runtime) Get(name string) (string, bool) {
	p := r.h.Current().Lookup(name)
	if p == nil {
		return "", false
	}
	return PolicyJSON(p), true
}

// Set validates a runtime policy as the file's are validated (alone, and
// together with every policy in force), stores it in the backend, and puts
// it in force here; the other instances follow within a second.
func (r *Runtime) Set(ctx context.Context, name, data string) error {
	p, err := ParsePolicyJSON(name, []byte(data))
	if err != nil {
		return err
	}
	if err := r.check("", p); err != nil {
		return err
	}
	canon := policyJSON(p, true)
	r.mu.Lock()
	next := maps.Clone(r.raw)
	next[name] = canon
	_, err = combine(r.file, next)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if err := r.backend.Put(ctx, name, canon); err != nil {
		return err
	}
	return r.Sync(ctx)
}

// Del removes a runtime policy; it reports whether there was one. File
// policies cannot be deleted at run time (edit the file).
func (r *Runtime) Del(ctx context.Context, name string) (bool, error) {
	r.mu.Lock()
	_, ok := r.raw[name]
	next := maps.Clone(r.raw)
	delete(next, name)
	_, err := combine(r.file, next)
	r.mu.Unlock()
	if ok && err != nil {
		return false, err
	}
	existed, err := r.backend.Delete(ctx, name)
	if err != nil {
		return false, err
	}
	return existed, r.Sync(ctx)
}

// SetFile replaces the file's policies (a SIGHUP reload) and puts the
// combination in force, or keeps the last good Set and returns why. The
// caller reports it; OnApply is for runtime changes.
func (r *Runtime) SetFile(s *Set) error {
	if err := CheckSet(s, r.Check); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	set, err := combine(s, r.raw)
	if err != nil {
		return err
	}
	r.file = s
	r.h.Store(set)
	return nil
}

// Sync reads the backend and puts its policies in force when they changed.
// A stored policy that no longer validates (written by another version)
// is left out, and the error says so; the rest still apply.
func (r *Runtime) Sync(ctx context.Context) error {
	stored, err := r.backend.Load(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fp := fingerprint(stored)
	if fp == r.applied {
		return nil
	}
	var bad []error
	good := map[string]string{}
	for name, data := range stored {
		if _, err := ParsePolicyJSON(name, []byte(data)); err != nil {
			bad = append(bad, err)
			continue
		}
		good[name] = data
	}
	set, err := combine(r.file, good)
	if err != nil {
		return err
	}
	r.raw, r.applied = good, fp
	r.h.Store(set)
	if len(bad) == 0 {
		r.report(set.Source, nil)
	}
	return errors.Join(bad...)
}

// check is Check of p, from file ("" for a runtime policy), as an Error.
func (r *Runtime) check(file string, p *limit.Policy) error {
	if r.Check == nil {
		return nil
	}
	return checkOne(file, p, r.Check)
}

func checkOne(file string, p *limit.Policy, check func(*limit.Policy) (string, error)) error {
	field, err := check(p)
	if err == nil {
		return nil
	}
	return &Error{File: file, Scope: scopeOf(0, p.Name), Field: field, Msg: err.Error()}
}

// CheckSet runs check (nil: none) on every policy of s, as Runtime.Check
// does, and joins what it finds: each error names s's file, the policy
// and the field.
func CheckSet(s *Set, check func(*limit.Policy) (field string, err error)) error {
	if check == nil {
		return nil
	}
	file := s.Source
	if file == "built-in" {
		file = ""
	}
	var errs []error
	for _, p := range s.Policies {
		if err := checkOne(file, p, check); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (r *Runtime) report(source string, err error) {
	if r.OnApply != nil {
		r.OnApply(source, err)
	}
}

// Run keeps the Set in force in step with the backend until ctx ends: at
// once on a Pub/Sub message, and every `every` in any case, so that a
// missed message heals. Errors go to OnApply.
func (r *Runtime) Run(ctx context.Context, every time.Duration) {
	kick := make(chan struct{}, 1)
	go r.backend.Watch(ctx, func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	})
	t := time.NewTicker(every)
	defer t.Stop()
	var failing string // the last error reported, so that an outage is told once
	for {
		sctx, cancel := context.WithTimeout(ctx, every)
		err := r.Sync(sctx)
		cancel()
		switch {
		case ctx.Err() != nil:
		case err != nil && err.Error() != failing:
			failing = err.Error()
			r.report("runtime", err)
		case err == nil:
			failing = ""
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-t.C:
		}
	}
}

// combine puts the runtime policies (by name) before the file's, leaving
// out file policies they replace, and validates the whole as one Set.
func combine(file *Set, raw map[string]string) (*Set, error) {
	if len(raw) == 0 {
		return file, nil
	}
	names := slices.Sorted(maps.Keys(raw))
	all := make([]*limit.Policy, 0, len(raw)+len(file.Policies))
	for _, name := range names {
		p, err := ParsePolicyJSON(name, []byte(raw[name]))
		if err != nil {
			return nil, err
		}
		all = append(all, p)
	}
	for _, p := range file.Policies {
		if _, replaced := raw[p.Name]; !replaced {
			all = append(all, p)
		}
	}
	s, err := NewSet(file.Timeout, all...)
	if err != nil {
		return nil, fmt.Errorf("with the runtime policies: %w", err)
	}
	s.Source = file.Source + " + " + strconv.Itoa(len(raw)) + " runtime " + plural(len(raw), "policy", "policies")
	return s, nil
}

func fingerprint(m map[string]string) string {
	if len(m) == 0 {
		return "" // as at the start: nothing to apply
	}
	b, _ := json.Marshal(m) // map keys are sorted
	return string(b)
}

// PolicyJSON writes p as the JSON object ParsePolicyJSON reads, with every
// field explicit: a hot block that is the default (limit.Hot.Default) is
// written as in force, mode and threshold.
func PolicyJSON(p *limit.Policy) string { return policyJSON(p, false) }

// policyJSON is PolicyJSON; stored, it is the form RL.POLICY SET stores,
// where a default hot block stays unwritten (its threshold written only if
// the config gave one), so that the policy keeps following the default of
// the sluice that reads it, in force or not (embedded).
func policyJSON(p *limit.Policy, stored bool) string {
	type hot struct {
		Mode      limit.HotMode `json:"mode,omitempty"`
		Threshold int64         `json:"threshold,omitempty"`
		Split     int           `json:"split,omitempty"`
	}
	v := struct {
		Name         string           `json:"name"`
		Match        string           `json:"match"`
		Algorithm    limit.Algorithm  `json:"algorithm"`
		Limit        int64            `json:"limit"`
		Rate         int64            `json:"rate,omitempty"`
		Period       string           `json:"period,omitempty"`
		OnStoreError limit.FailMode   `json:"on_store_error"`
		OnOverload   limit.FailMode   `json:"on_overload,omitempty"`
		LocalShare   float64          `json:"local_share"`
		Shadow       bool             `json:"shadow"`
		DenyCache    *bool            `json:"deny_cache,omitempty"`
		Hot          *hot             `json:"hot,omitempty"`
		Scope        limit.Scope      `json:"scope,omitempty"`
		RegionFloor  *float64         `json:"region_floor,omitempty"`
		Calendar     limit.Calendar   `json:"calendar,omitempty"`
		Timezone     string           `json:"timezone,omitempty"`
		MaxTTL       string           `json:"max_ttl,omitempty"`
		Durability   limit.Durability `json:"durability,omitempty"`
	}{p.Name, p.Match, p.Algorithm, p.Limit, p.Rate, formatDuration(p.Period), p.OnStoreError, p.OnOverload, p.LocalShare, p.Shadow, nil,
		&hot{p.Hot.Mode, p.Hot.Threshold, p.Hot.Split}, "", nil, p.Calendar, zoneName(p), "", p.Durability}
	if p.MaxTTL != 0 {
		v.MaxTTL = formatDuration(p.MaxTTL)
	}
	if p.Calendar != "" {
		v.Period = "" // the calendar's: a period is not written with one
	}
	if p.NoDenyCache {
		off := false
		v.DenyCache = &off
	}
	if p.Global() {
		f := max(0, p.RegionFloor)
		if p.RegionFloor == 0 {
			f = limit.DefaultRegionFloor
		}
		v.Scope, v.RegionFloor = p.Scope, &f
	}
	if v.Algorithm == "" {
		v.Algorithm = limit.TokenBucket
	}
	switch {
	case stored && p.Hot.Default && (p.Hot.Mode != limit.HotLease || p.Hot.Threshold == limit.DefaultHotThreshold):
		v.Hot = nil
	case stored && p.Hot.Default:
		v.Hot = &hot{Threshold: p.Hot.Threshold}
	case v.Hot.Mode == "":
		v.Hot.Mode = limit.HotOff
	}
	if v.LocalShare == 0 {
		v.LocalShare = 1
	}
	if v.Durability == "" && !stored {
		// Shown explicit; stored only when replica, so that a sluice
		// that predates the field still reads the policies of this one.
		v.Durability = limit.DurabilityNone
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// MemoryBackend is the Backend of the embedded store: one process, so
// nothing to tell anyone.
type MemoryBackend struct {
	mu sync.Mutex
	m  map[string]string
}

// Load returns a copy of the policies.
func (b *MemoryBackend) Load(context.Context) (map[string]string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.m), nil
}

// Put stores one policy.
func (b *MemoryBackend) Put(_ context.Context, name, data string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil {
		b.m = map[string]string{}
	}
	b.m[name] = data
	return nil
}

// Delete removes one policy.
func (b *MemoryBackend) Delete(_ context.Context, name string) (bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.m[name]
	delete(b.m, name)
	return ok, nil
}

// Watch has nothing to watch.
func (b *MemoryBackend) Watch(ctx context.Context, _ func()) { <-ctx.Done() }
