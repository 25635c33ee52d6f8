package policy

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

// The hot block a policy gets when its config names no hot mode: lease at
// limit.DefaultHotThreshold where a lease applies and pays, off elsewhere,
// and never an error for a config that does not mention hot.
func TestHotDefaultYAML(t *testing.T) {
	t.Parallel()
	lease := limit.Hot{Mode: limit.HotLease, Threshold: limit.DefaultHotThreshold, Default: true}
	off := limit.Hot{Mode: limit.HotOff, Default: true}
	pol := func(fields string) string {
		return "defaults: {on_store_error: open}\npolicies:\n  - {name: a, match: \"*\", " + fields + "}\n"
	}
	tests := []struct {
		name, yaml string
		want       limit.Hot
	}{
		{"token bucket", pol("limit: 100, rate: 50"), lease},
		{"gcra", pol("algorithm: gcra, limit: 100, rate: 50"), lease},
		{"limit 32, the smallest", pol("limit: 32, rate: 1, period: 1m"), lease},
		{"limit 31", pol("limit: 31, rate: 1000"), off},
		{"5 a minute", pol("limit: 5, rate: 5, period: 1m"), off},
		{"sliding window", pol("algorithm: sliding_window, limit: 1000, period: 1m"), off},
		{"fixed window", pol("algorithm: fixed_window, limit: 1000, period: 1m"), off},
		{"scope global", pol("limit: 1000, rate: 1000, scope: global"), off},
		{"shadow", pol("limit: 1000, rate: 1000, shadow: true"), off},
		{"explicit off", pol("limit: 1000, rate: 1000, hot: {mode: off}"), limit.Hot{Mode: limit.HotOff}},
		{"explicit off in defaults", "defaults: {on_store_error: open, hot: {mode: off}}\npolicies:\n  - {name: a, match: \"*\", limit: 1000, rate: 1000}\n",
			limit.Hot{Mode: limit.HotOff}},
		{"explicit lease takes the default threshold", pol("limit: 1000, rate: 1000, hot: {mode: lease}"),
			limit.Hot{Mode: limit.HotLease, Threshold: limit.DefaultHotThreshold}},
		{"explicit split takes the default threshold", pol("limit: 1000, rate: 1000, hot: {mode: split, split: 4}"),
			limit.Hot{Mode: limit.HotSplit, Threshold: limit.DefaultHotThreshold, Split: 4}},
		{"threshold alone keeps the default mode", pol("limit: 1000, rate: 1000, hot: {threshold: 2000}"),
			limit.Hot{Mode: limit.HotLease, Threshold: 2000, Default: true}},
		{"threshold from defaults", "defaults: {on_store_error: open, hot: {threshold: 250}}\npolicies:\n  - {name: a, match: \"*\", limit: 1000, rate: 1000}\n",
			limit.Hot{Mode: limit.HotLease, Threshold: 250, Default: true}},
		{"threshold alone on a window", pol("algorithm: fixed_window, limit: 1000, hot: {threshold: 2000}"), off},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.yaml), "sluice.yaml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := s.Policies[0].Hot; got != tt.want {
				t.Errorf("hot = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// An explicit lease or split where a lease cannot apply is still an error;
// only the default stays off there silently.
func TestHotDefaultExplicitErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ yaml, want string }{
		{"policies: [{name: a, match: x, algorithm: sliding_window, limit: 100, on_store_error: open, hot: {mode: lease}}]",
			`hot.mode: lease needs a bucket algorithm (token_bucket or gcra), not sliding_window`},
		{"policies: [{name: a, match: x, algorithm: fixed_window, limit: 100, on_store_error: open, hot: {mode: lease, threshold: 5}}]",
			`hot.mode: lease needs a bucket algorithm (token_bucket or gcra), not fixed_window`},
		{"policies: [{name: a, match: x, limit: 100, rate: 100, scope: global, on_store_error: open, hot: {mode: lease}}]",
			`hot.mode: must be off when scope is global`},
		{"policies: [{name: a, match: x, limit: 100, rate: 100, on_store_error: open, hot: {mode: split}}]",
			`hot.split: required when hot.mode is split`},
	} {
		if _, err := Parse([]byte(tt.yaml), "sluice.yaml"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one with %q", tt.yaml, err, tt.want)
		}
	}
}

// The same defaults through RL.POLICY SET's JSON and NewSet, the built-in
// policy, and what RL.POLICY GET shows: the hot block in force, default or
// not.
func TestHotDefaultJSON(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		json    string
		want    limit.Hot
		wantGet string
	}{
		{`{"match": "x", "limit": 100, "rate": 50, "on_store_error": "open"}`,
			limit.Hot{Mode: limit.HotLease, Threshold: limit.DefaultHotThreshold, Default: true}, `"hot":{"mode":"lease","threshold":500}`},
		{`{"match": "x", "limit": 100, "rate": 50, "on_store_error": "open", "hot": {"threshold": 800}}`,
			limit.Hot{Mode: limit.HotLease, Threshold: 800, Default: true}, `"hot":{"mode":"lease","threshold":800}`},
		{`{"match": "x", "limit": 100, "rate": 50, "on_store_error": "open", "hot": {"mode": "off"}}`,
			limit.Hot{Mode: limit.HotOff}, `"hot":{"mode":"off"}`},
		{`{"match": "x", "limit": 100, "rate": 50, "on_store_error": "open", "hot": {"mode": "lease"}}`,
			limit.Hot{Mode: limit.HotLease, Threshold: limit.DefaultHotThreshold}, `"hot":{"mode":"lease","threshold":500}`},
		{`{"match": "x", "algorithm": "sliding_window", "limit": 600, "period": "1m", "on_store_error": "open"}`,
			limit.Hot{Mode: limit.HotOff, Default: true}, `"hot":{"mode":"off"}`},
		{`{"match": "x", "limit": 5, "rate": 5, "period": "1m", "on_store_error": "closed"}`,
			limit.Hot{Mode: limit.HotOff, Default: true}, `"hot":{"mode":"off"}`},
	} {
		p, err := ParsePolicyJSON("p", []byte(tt.json))
		if err != nil {
			t.Fatalf("%s: %v", tt.json, err)
		}
		if p.Hot != tt.want {
			t.Errorf("%s: hot = %+v, want %+v", tt.json, p.Hot, tt.want)
		}
		if got := PolicyJSON(p); !strings.Contains(got, tt.wantGet) {
			t.Errorf("%s: PolicyJSON = %s, want it to contain %s", tt.json, got, tt.wantGet)
		}
	}

	s, err := NewSet(0, &limit.Policy{Name: "a", Match: "*", Limit: 1000, Rate: 1000, OnStoreError: limit.FailOpen})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.Policies[0].Hot, (limit.Hot{Mode: limit.HotLease, Threshold: limit.DefaultHotThreshold, Default: true}); got != want {
		t.Errorf("NewSet: hot = %+v, want %+v", got, want)
	}
	if got, want := Default().Policies[0].Hot, (limit.Hot{Mode: limit.HotLease, Threshold: limit.DefaultHotThreshold, Default: true}); got != want {
		t.Errorf("Default: hot = %+v, want %+v", got, want)
	}
	if got := Default().String(); !strings.Contains(got, " hot=lease(threshold=500/s) (default)") {
		t.Errorf("Default().String() = %s, want the lease shown as the default", got)
	}
}

// RL.POLICY SET stores a policy without a hot mode as written (so it keeps
// following the default of the sluice that reads it), while GET shows the
// block in force; an explicit mode is stored as such.
func TestHotDefaultStored(t *testing.T) {
	t.Parallel()
	b := &MemoryBackend{}
	rt := NewRuntime(NewHolder(nil), Default(), b)
	ctx := context.Background()
	for name, js := range map[string]string{
		"plain":     `{"match": "plain:*", "limit": 100, "rate": 50, "on_store_error": "open"}`,
		"threshold": `{"match": "thr:*", "limit": 100, "rate": 50, "on_store_error": "open", "hot": {"threshold": 900}}`,
		"off":       `{"match": "off:*", "limit": 100, "rate": 50, "on_store_error": "open", "hot": {"mode": "off"}}`,
	} {
		if err := rt.Set(ctx, name, js); err != nil {
			t.Fatalf("Set %s: %v", name, err)
		}
	}
	stored, err := b.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct{ stored, get string }{
		"plain":     {"", `"hot":{"mode":"lease","threshold":500}`},
		"threshold": {`"hot":{"threshold":900}`, `"hot":{"mode":"lease","threshold":900}`},
		"off":       {`"hot":{"mode":"off"}`, `"hot":{"mode":"off"}`},
	} {
		if want.stored == "" && strings.Contains(stored[name], `"hot"`) {
			t.Errorf("%s stored as %s, want no hot block", name, stored[name])
		} else if !strings.Contains(stored[name], want.stored) {
			t.Errorf("%s stored as %s, want %s", name, stored[name], want.stored)
		}
		got, ok := rt.Get(name)
		if !ok || !strings.Contains(got, want.get) {
			t.Errorf("GET %s = %s, %v; want %s", name, got, ok, want.get)
		}
	}
	list := map[string]string{}
	for _, in := range rt.List() {
		list[in.Name] = in.Hot
	}
	if list["plain"] != "lease(threshold=500/s) (default)" || list["threshold"] != "lease(threshold=900/s) (default)" || list["off"] != "off" ||
		list["default"] != "lease(threshold=500/s) (default)" {
		t.Errorf("LIST hot blocks: %v", list)
	}
	p := rt.h.Current().Lookup("plain")
	if p == nil || p.Hot != (limit.Hot{Mode: limit.HotLease, Threshold: limit.DefaultHotThreshold, Default: true}) {
		t.Errorf("plain in force: %+v, want the default lease", p)
	}
}
