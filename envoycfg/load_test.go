package envoycfg

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// writeDir writes files (name → content) into a new directory.
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string // each must appear in the error, with the file and path
	}{
		{"unknown field", map[string]string{"a.yaml": `domain: d
descriptors:
  - key: k1
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k2
    rate_limit:
      unitt: second
      requests_per_unit: 1
`}, []string{`a.yaml:7: descriptors[1].rate_limit.unitt: unknown field "unitt" (did you mean "unit"?)`, `a.yaml:7: descriptors[1].rate_limit.unit: required`}},
		{"unknown top field", map[string]string{"a.yaml": "domain: d\ndescriptor: []\n"},
			[]string{`a.yaml:2: descriptor: unknown field "descriptor" (did you mean "descriptors"?)`}},
		{"unknown nested field", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: a\n    descriptors:\n      - key: b\n        shadow: true\n"},
			[]string{`a.yaml:6: descriptors[0].descriptors[0].shadow: unknown field "shadow"`}},
		{"duplicate domain", map[string]string{"a.yaml": "domain: d\n", "b.yml": "domain: d\n"},
			[]string{`b.yml:1: domain: duplicate domain "d": `, `a.yaml defines it too`}},
		{"duplicate descriptor", map[string]string{"a.yaml": `domain: d
descriptors:
  - key: k
    value: v
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: v
    rate_limit: {unit: minute, requests_per_unit: 1}
`}, []string{`a.yaml:6: descriptors[1]: duplicate descriptor k=v on this level (first at line 3)`}},
		{"duplicate key-only descriptor", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n  - key: k\n"},
			[]string{`a.yaml:4: descriptors[1]: duplicate descriptor k on this level`}},
		{"missing unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit:\n      requests_per_unit: 5\n"},
			[]string{`a.yaml:5: descriptors[0].rate_limit.unit: required`}},
		{"unknown unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 5}\n"},
			[]string{`a.yaml:4: descriptors[0].rate_limit.unit: unknown unit "fortnight"`}},
		{"missing requests_per_unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second}\n"},
			[]string{`descriptors[0].rate_limit.requests_per_unit: required`}},
		{"bad requests_per_unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: -1}\n  - key: j\n    rate_limit: {unit: second, requests_per_unit: 4294967296}\n"},
			[]string{`descriptors[0].rate_limit.requests_per_unit: must be an integer from 0 to 4294967295, got -1`, `descriptors[1].rate_limit.requests_per_unit: must be an integer`}},
		{"unlimited with unit", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n"},
			[]string{`descriptors[0].rate_limit.unit: must not be set when unlimited is true`}},
		{"missing key", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - value: v\n"},
			[]string{`a.yaml:3: descriptors[0].key: required`}},
		{"empty key", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: \"\"\n"},
			[]string{`descriptors[0].key: must not be empty`}},
		{"missing domain", map[string]string{"a.yaml": "descriptors:\n  - key: k\n    rate_limit: {unitt: second}\n"},
			[]string{`a.yaml:1: domain: required`, `descriptors[0].rate_limit.unitt: unknown field`}},
		{"replaces itself", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, name: x, replaces: [{name: x}]}\n"},
			[]string{`descriptors[0].rate_limit.replaces: a rule cannot replace itself ("x")`}},
		{"replaces without name", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{}]}\n"},
			[]string{`descriptors[0].rate_limit.replaces[0].name: required`}},
		{"share_threshold without wildcard", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    value: v\n    share_threshold: true\n"},
			[]string{`descriptors[0].share_threshold: only a wildcard value`}},
		{"quota_mode not a boolean", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    quota_mode: sometimes\n"},
			[]string{`descriptors[0].quota_mode:`}},
		{"bad algorithm", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky}\n"},
			[]string{`descriptors[0].rate_limit.algorithm: unknown algorithm "leaky"`}},
		{"bad on_store_error", map[string]string{"a.yaml": "domain: d\non_store_error: maybe\n"},
			[]string{`a.yaml:2: on_store_error: must be one of open, closed, local, got "maybe"`}},
		{"not representable", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: year, requests_per_unit: 4000000000, algorithm: sliding_window}\n"},
			[]string{`descriptors[0].rate_limit: sliding_window cannot be held`}},
		{"bad types", map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: [a]\n    shadow_mode: maybe\n  - 7\ndescriptors2: x\n"},
			[]string{`descriptors[0].key: must be a string, got a list`, `descriptors[0].shadow_mode: must be true or false, got "maybe"`, `descriptors[1]: must be a mapping`}},
		{"descriptors not a list", map[string]string{"a.yaml": "domain: d\ndescriptors: {key: k}\n"},
			[]string{`a.yaml:2: descriptors: must be a list of descriptors, got a mapping`}},
		{"empty file", map[string]string{"a.yaml": ""}, []string{`a.yaml: the file is empty`}},
		{"not a mapping", map[string]string{"a.yaml": "- a\n"}, []string{`a.yaml:1: the file must be a mapping`}},
		{"invalid YAML", map[string]string{"a.yaml": "domain: [\n"}, []string{`a.yaml: invalid YAML: `}},
		{"two documents", map[string]string{"a.yaml": "domain: a\n---\ndomain: b\n"}, []string{`only one YAML document is allowed`}},
		{"empty dir", map[string]string{"notes.txt": "x", ".hidden.yaml": "x"}, []string{`no *.yaml or *.yml files in`}},
		{"too deep", map[string]string{"a.yaml": "domain: d\ndescriptors:\n" + deep(MaxDepth+1)}, []string{`nested deeper than 32 levels`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeDir(t, tt.files)
			c, err := LoadDir(dir)
			if err == nil {
				t.Fatalf("LoadDir = %v, nil; want an error", c)
			}
			if c != nil {
				t.Errorf("LoadDir returned a config with an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error:\n%v\nwant it to contain %q", err, w)
				}
			}
			if tt.name != "empty dir" {
				var e *Error
				if !errors.As(err, &e) || !strings.HasPrefix(e.File, dir) {
					t.Errorf("errors.As(*Error) = %+v, want the file named", e)
				}
			}
		})
	}
}

// deep returns n nested descriptor lists, as YAML under "descriptors:".
func deep(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		ind := strings.Repeat("    ", i)
		b.WriteString(ind + "  - key: k\n")
		if i < n-1 {
			b.WriteString(ind + "    descriptors:\n")
		}
	}
	return b.String()
}

func TestLoadErrorsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("domain: d\ndescriptors:\n")
	for i := 0; i < 100; i++ {
		b.WriteString("  - key: k\n    bogus: 1\n")
	}
	_, err := Parse("a.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "… and ") || strings.Count(err.Error(), "\n") > maxErrors+1 {
		t.Errorf("200 errors reported as:\n%v", err)
	}
	// An alias bomb stops at the node budget, not at memory.
	var bomb strings.Builder
	for lv := 0; lv < 6; lv++ {
		fmt.Fprintf(&bomb, "l%d: &l%d\n", lv, lv)
		for _, k := range "abcdefghij" {
			if lv == 0 {
				fmt.Fprintf(&bomb, "  - key: %c\n", k)
			} else {
				fmt.Fprintf(&bomb, "  - {key: %c, descriptors: *l%d}\n", k, lv-1)
			}
		}
	}
	bomb.WriteString("domain: d\ndescriptors: *l5\n")
	if _, err := Parse("bomb.yaml", []byte(bomb.String())); err == nil || !strings.Contains(err.Error(), "too many YAML nodes") {
		t.Errorf("alias bomb: %v", err)
	}
}

// What ratelimit accepts and sluice keeps: unit case, YAML 1.1 booleans,
// numbers as values, anchors and merge keys, metadata, and the sluice fields.
func TestLoadAccepts(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"a.yaml": `domain: a
on_store_error: closed
descriptors:
  - key: code
    value: 500
    shadow_mode: yes
    detailed_metric: true
    value_to_metric: false
    metadata: {team: edge, tags: [a, b]}
    rate_limit: &r
      unit: Second
      requests_per_unit: 1_000
  - key: user
    rate_limit:
      <<: *r
      algorithm: token_bucket
      on_store_error: local
`,
		"b.yml":          "domain: b\nalgorithm: gcra\ndescriptors:\n  - key: k\n    rate_limit: {unit: month, requests_per_unit: 30}\n  - key: j\n    rate_limit: {unit: year, requests_per_unit: 365}\n  - key: w\n    rate_limit: {unit: WEEK, requests_per_unit: 7}\n",
		"notes.txt":      "not read",
		".swap.yaml":     "not read",
		"sub.yaml/x.yml": "",
	})
	c, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(c.Domains(), ","), "a,b"; got != want {
		t.Errorf("domains %s, want %s", got, want)
	}
	check := func(domain string, entries []Entry, want limit.Policy) {
		t.Helper()
		p, _ := c.Match(domain, entries)
		if p == nil || *p != want {
			t.Errorf("%s %v: %+v, want %+v", domain, entries, p, want)
		}
	}
	check("a", e("code", "500"), limit.Policy{Name: "a:code=500", Algorithm: limit.FixedWindow, Limit: 1000, Rate: 1000, Period: time.Second, OnStoreError: limit.FailClosed, Shadow: true, Hot: limit.Hot{Mode: limit.HotOff, Default: true}})
	check("a", e("user", "x"), limit.Policy{Name: "a:user", Algorithm: limit.TokenBucket, Limit: 1000, Rate: 1000, Period: time.Second, OnStoreError: limit.FailLocal, Hot: limit.Hot{Mode: limit.HotLease, Threshold: limit.DefaultHotThreshold, Default: true}})
	check("b", e("k", "x"), limit.Policy{Name: "b:k", Algorithm: limit.GCRA, Limit: 30, Rate: 30, Period: 30 * 24 * time.Hour, OnStoreError: limit.FailOpen, Hot: limit.Hot{Mode: limit.HotOff, Default: true}})
	check("b", e("j", "x"), limit.Policy{Name: "b:j", Algorithm: limit.GCRA, Limit: 365, Rate: 365, Period: 365 * 24 * time.Hour, OnStoreError: limit.FailOpen, Hot: limit.Hot{Mode: limit.HotLease, Threshold: limit.DefaultHotThreshold, Default: true}})
	check("b", e("w", "x"), limit.Policy{Name: "b:w", Algorithm: limit.GCRA, Limit: 7, Rate: 7, Period: 7 * 24 * time.Hour, OnStoreError: limit.FailOpen, Hot: limit.Hot{Mode: limit.HotOff, Default: true}})
	if n := len(c.Rules()); n != 5 {
		t.Errorf("%d rules, want 5:\n%s", n, c)
	}
	if s := c.String(); !strings.Contains(s, "a:code=500 1000 per second algorithm=fixed_window on_store_error=closed shadow (") {
		t.Errorf("String():\n%s", s)
	}
}

// The walk never backtracks (as ratelimit): an exact value that leads
// nowhere does not fall back to the key-only descriptor; and a key with
// ':' or '=' gets a policy name of its own.
func TestMatchOrder(t *testing.T) {
	c, err := Parse("a.yaml", []byte(`domain: d
descriptors:
  - key: a
    value: x
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    descriptors:
      - key: c
        rate_limit: {unit: second, requests_per_unit: 2}
  - key: a
    value: "x*"
    descriptors:
      - key: c
        rate_limit: {unit: second, requests_per_unit: 3}
  - key: "k:1"
    value: "v=2"
    rate_limit: {unit: second, requests_per_unit: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		entries []Entry
		limit   int64 // -1: no match
	}{
		{e("a", "x", "b", "1"), 1},
		{e("a", "x", "c", "1"), -1}, // exact a=x has no c: no fallback
		{e("a", "xy", "c", "1"), 3}, // wildcard before key-only
		{e("a", "y", "c", "1"), 2},
		{e("a", "y"), -1},
		{e("k:1", "v=2"), 4},
		{nil, -1},
	}
	for _, tt := range tests {
		p, _ := c.Match("d", tt.entries)
		switch {
		case tt.limit < 0 && p != nil:
			t.Errorf("%v matched %s", tt.entries, p.Name)
		case tt.limit >= 0 && (p == nil || p.Limit != tt.limit):
			t.Errorf("%v: %+v, want limit %d", tt.entries, p, tt.limit)
		}
	}
	if p, _ := c.Match("d", e("k:1", "v=2")); p.Name != "d:k%3A1=v%3D2" {
		t.Errorf("name %q", p.Name)
	}
}

// The gRPC door declares this matcher; Holder and Config must fit it.
var (
	_ interface {
		Match(domain string, entries []Entry) (*limit.Policy, bool)
	} = (*Holder)(nil)
	_ interface {
		Match(domain string, entries []Entry) (*limit.Policy, bool)
	} = (*Config)(nil)
)

func TestHolderReload(t *testing.T) {
	dir := writeDir(t, map[string]string{"a.yaml": "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n"})
	var zero Holder
	if p, u := zero.Match("d", e("k", "v")); p != nil || u {
		t.Errorf("zero Holder matched %v %v", p, u)
	}
	h := NewHolder(nil)
	if err := h.Reload(dir); err != nil {
		t.Fatal(err)
	}
	limitOf := func() int64 {
		p, _ := h.Match("d", e("k", "v"))
		if p == nil {
			return -1
		}
		return p.Limit
	}
	if got := limitOf(); got != 1 {
		t.Fatalf("limit %d, want 1", got)
	}
	// Concurrent readers see one config or the other, never a torn one.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if got := limitOf(); got != 1 && got != 2 {
					t.Errorf("limit %d during reload", got)
					return
				}
				h.LookupRequest("d", [][]Entry{e("k", "v")})
			}
		}()
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2}\n")
	if err := h.Reload(dir); err != nil {
		t.Fatal(err)
	}
	write("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unitt: second}\n")
	err := h.Reload(dir)
	close(stop)
	wg.Wait()
	if err == nil || !strings.Contains(err.Error(), "descriptors[0].rate_limit.unitt") {
		t.Errorf("bad reload: %v", err)
	}
	if got := limitOf(); got != 2 {
		t.Errorf("after a bad reload: limit %d, want the last good 2", got)
	}
}
