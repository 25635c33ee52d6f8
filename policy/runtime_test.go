package policy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

const runtimeFile = `defaults: {on_store_error: local}
policies:
  - name: login
    match: "login:*"
    limit: 5
    rate: 5
    period: 1m
  - name: api
    match: "*"
    limit: 100
    rate: 50
`

func newRuntime(t *testing.T) (*Runtime, *Holder, *MemoryBackend) {
	t.Helper()
	file, err := Parse([]byte(runtimeFile), "sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	h := NewHolder(nil)
	b := &MemoryBackend{}
	return NewRuntime(h, file, b), h, b
}

func TestRuntimePolicies(t *testing.T) {
	t.Parallel()
	r, h, b := newRuntime(t)
	ctx := context.Background()
	if got := h.Current().Match("x").Name; got != "api" {
		t.Fatalf("before: %s", got)
	}
	// a new policy goes first; one named like a file policy replaces it
	if err := r.Set(ctx, "acme", `{"match": "acme:*", "algorithm": "fixed_window", "limit": 3, "period": "1s", "on_store_error": "closed"}`); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, "login", `{"match": "login:*", "limit": 1, "rate": 1, "period": "1h", "on_store_error": "closed"}`); err != nil {
		t.Fatal(err)
	}
	if p := h.Current().Match("acme:1"); p.Name != "acme" || p.Limit != 3 {
		t.Fatalf("acme:1 → %+v", p)
	}
	if p := h.Current().Match("login:bob"); p.Limit != 1 {
		t.Fatalf("the runtime login must replace the file's: %+v", p)
	}
	var names []string
	for _, i := range r.List() {
		names = append(names, i.Name+"@"+i.Source)
	}
	if got := strings.Join(names, " "); got != "acme@runtime login@runtime api@sluice.yaml" {
		t.Fatalf("LIST = %s", got)
	}
	js, ok := r.Get("acme")
	if !ok || !strings.Contains(js, `"algorithm":"fixed_window"`) {
		t.Fatalf("GET acme = %s %v", js, ok)
	}
	if p, err := ParsePolicyJSON("acme", []byte(js)); err != nil || PolicyJSON(p) != js {
		t.Fatalf("GET does not round-trip: %v", err)
	}

	// the same validation as the file, and the whole set must hold
	for _, bad := range []struct{ name, json, want string }{
		{"x", `{"match": "x:*", "limit": 0, "rate": 1, "on_store_error": "open"}`, `limit: must be a positive integer`},
		{"x", `{"match": "x:*", "limit": 1, "rate": 1}`, `on_store_error: required`},
		{"all", `{"match": "*", "limit": 1, "rate": 1, "on_store_error": "open"}`, `never used`},
	} {
		if err := r.Set(ctx, bad.name, bad.json); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("SET %s %s: %v, want %q", bad.name, bad.json, err, bad.want)
		}
	}
	if m, _ := b.Load(ctx); len(m) != 2 {
		t.Fatalf("refused policies reached the backend: %v", m)
	}

	// a SIGHUP reload keeps the runtime policies
	file2, err := Parse([]byte(strings.Replace(runtimeFile, "limit: 100", "limit: 7", 1)), "sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetFile(file2); err != nil {
		t.Fatal(err)
	}
	if h.Current().Match("x").Limit != 7 || h.Current().Match("acme:1").Name != "acme" {
		t.Fatal("reload lost a side")
	}

	if ok, err := r.Del(ctx, "login"); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if p := h.Current().Match("login:bob"); p.Limit != 5 {
		t.Fatalf("after DEL the file's login is back: %+v", p)
	}
	if ok, _ := r.Del(ctx, "login"); ok {
		t.Fatal("DEL of a missing policy reports 1")
	}
}

// Another instance's change, seen through the backend alone (the periodic
// check), and a stored policy that no longer validates is left out.
func TestRuntimeSync(t *testing.T) {
	t.Parallel()
	r, h, b := newRuntime(t)
	ctx := context.Background()
	_ = b.Put(ctx, "other", `{"match": "o:*", "limit": 2, "rate": 2, "on_store_error": "open"}`)
	_ = b.Put(ctx, "broken", `{"match": "b:*", "limit": -1}`)
	err := r.Sync(ctx)
	if err == nil || !strings.Contains(err.Error(), `"broken"`) {
		t.Fatalf("Sync = %v, want the broken policy named", err)
	}
	if h.Current().Match("o:1").Name != "other" || h.Current().Match("b:1").Name != "api" {
		t.Fatal("the good policy must apply, the broken one not")
	}
}

// TestPolicyJSONDenyCache: deny_cache: false survives RL.POLICY's JSON both
// ways, and a policy that keeps the default writes no field.
func TestPolicyJSONDenyCache(t *testing.T) {
	p, err := ParsePolicyJSON("a", []byte(`{"match": "a:*", "limit": 5, "rate": 1, "on_store_error": "open", "deny_cache": false}`))
	if err != nil || !p.NoDenyCache {
		t.Fatalf("parsed %+v, %v; want NoDenyCache", p, err)
	}
	js := PolicyJSON(p)
	if !strings.Contains(js, `"deny_cache":false`) {
		t.Fatalf("PolicyJSON = %s, want deny_cache false", js)
	}
	q, err := ParsePolicyJSON("a", []byte(js))
	if err != nil || !q.NoDenyCache {
		t.Fatalf("round trip %+v, %v", q, err)
	}
	q.NoDenyCache = false
	if js := PolicyJSON(q); strings.Contains(js, "deny_cache") {
		t.Fatalf("PolicyJSON = %s, want no deny_cache field", js)
	}
	if _, err := ParsePolicyJSON("a", []byte(`{"match": "a:*", "limit": 5, "rate": 1, "on_store_error": "open", "deny_cache": "no"}`)); err == nil || !strings.Contains(err.Error(), "deny_cache") {
		t.Fatalf("deny_cache \"no\": %v, want an error naming the field", err)
	}
}

// TestChangeHook: every path that changes the Set in force calls the
// holder's OnChange hook, before the new Set is in force (the hook sees
// the old one), and once per change: RL.POLICY SET and DEL, another
// instance's change picked up by Sync, a reload of the file (SetFile,
// SIGHUP and the config watch) and Holder.Reload. A Sync that finds
// nothing new, a SetFile that fails validation and a Store of the Set in
// force call nothing.
func TestChangeHook(t *testing.T) {
	t.Parallel()
	r, h, b := newRuntime(t)
	ctx := context.Background()
	calls := 0
	var seen *Set
	h.OnChange(func() { calls++; seen = h.Current() })
	file, err := Parse([]byte(runtimeFile), "sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/sluice.yaml"
	writeFile(t, path, runtimeFile)
	for _, step := range []struct {
		name  string
		do    func() error
		calls int
	}{
		{"RL.POLICY SET", func() error {
			return r.Set(ctx, "acme", `{"match": "acme:*", "limit": 3, "rate": 1, "period": "1s", "on_store_error": "closed"}`)
		}, 1},
		{"another instance's SET, by Sync", func() error {
			_ = b.Put(ctx, "other", `{"match": "o:*", "limit": 2, "rate": 2, "on_store_error": "open"}`)
			return r.Sync(ctx)
		}, 1},
		{"a Sync with nothing new", func() error { return r.Sync(ctx) }, 0},
		{"RL.POLICY DEL", func() error { _, err := r.Del(ctx, "acme"); return err }, 1},
		{"a reload of the file", func() error { return r.SetFile(file) }, 1},
		{"a reload refused", func() error {
			r.Check = func(*limit.Policy) (string, error) { return "limit", errors.New("refused") }
			defer func() { r.Check = nil }()
			if r.SetFile(file) == nil {
				t.Error("SetFile of a Set its Check refuses: no error")
			}
			return nil
		}, 0},
		{"Holder.Reload", func() error { _, err := h.Reload(path); return err }, 1},
		{"Store of the Set in force", func() error { h.Store(h.Current()); return nil }, 0},
	} {
		before, n := h.Current(), calls
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if got := calls - n; got != step.calls {
			t.Fatalf("%s: the hook ran %d times, want %d", step.name, got, step.calls)
		}
		if step.calls > 0 && seen != before {
			t.Fatalf("%s: the hook ran with the new Set already in force", step.name)
		}
	}
	h.OnChange(nil)
	if _, err := h.Reload(path); err != nil || calls != 5 {
		t.Fatalf("Reload after OnChange(nil): %v, %d hook calls, want 5", err, calls)
	}
}
