package envoycfg

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse: any bytes load or fail with an error, never a panic, in work
// bounded by the file's size; a loaded config answers any descriptor, and
// every policy it gives is one a store can hold (or a blocked rule).
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "readme", "*.yaml"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, "example7", "key_1", "value_1", "user", "bkthomps")
	}
	f.Add([]byte("domain: d\ndescriptors:\n  - key: k\n    value: 'a*b*'\n    share_threshold: true\n    rate_limit: {unit: day, requests_per_unit: 3, name: n}\n"), "d", "k", "ab", "k", "axxb")
	f.Add([]byte("domain: d\ndescriptors: &x\n  - key: k\n    descriptors: *x\n"), "d", "k", "", "k", "")
	f.Fuzz(func(t *testing.T, data []byte, domain, k1, v1, k2, v2 string) {
		if len(data) > MaxFileBytes {
			return
		}
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			if c != nil {
				t.Fatal("a config and an error")
			}
			return
		}
		for _, r := range c.Rules() {
			if (r.Policy == nil) != r.Unlimited {
				t.Fatalf("rule %s: unlimited %v with policy %v", r.ID, r.Unlimited, r.Policy)
			}
			if r.Policy != nil && !r.Blocked() && representable(r.Policy) != "" {
				t.Fatalf("rule %s: %s", r.ID, representable(r.Policy))
			}
		}
		for _, d := range c.Domains() {
			domain = d
			break
		}
		one, two := []Entry{{k1, v1}}, []Entry{{k1, v1}, {k2, v2}}
		for _, h := range c.LookupRequest(domain, [][]Entry{one, two, two}) {
			if (h.Rule == nil) != (h.Key == "") {
				t.Fatalf("hit %+v: a rule without a key or a key without a rule", h)
			}
		}
		c.Match(domain, two)
		_ = c.String()
	})
}
