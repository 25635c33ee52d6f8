package policy

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

// FuzzParse checks that Parse never panics, that every error line names
// the file, and that a Set it returns keeps its invariants. Seeds are in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(designConfig))
	f.Add([]byte(ok))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if s != nil {
				t.Fatalf("Parse returned a Set and an error: %v", err)
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "fuzz.yaml") && !strings.HasPrefix(line, "… and ") {
					t.Fatalf("error line does not name the file: %q", line)
				}
			}
			return
		}
		checkSet(t, s)
	})
}

// FuzzParsePolicyJSON checks the JSON entry point the same way.
func FuzzParsePolicyJSON(f *testing.F) {
	f.Add("p", []byte(`{"match":"a:*","limit":5,"rate":1,"period":"1m","on_store_error":"open","hot":{"mode":"split","threshold":9,"split":4}}`))
	f.Add("p", []byte(`{"match":"a","limit":1,"rate":1,"on_store_error":"local","local_share":0.5,"shadow":true}`))
	f.Add("p", []byte(`{"match":"a","limit":100,"rate":1,"on_store_error":"open","hot":{"threshold":7}}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		p, err := ParsePolicyJSON(name, data)
		if err != nil {
			if p != nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v and a multi-line or extra error: %q", p, err)
			}
			return
		}
		s, err := NewSet(0, p)
		if err != nil {
			t.Fatalf("ParsePolicyJSON accepted a policy NewSet rejects: %v", err)
		}
		checkSet(t, s)
		// What RL.POLICY SET stores reads back with the same hot block,
		// a default one still the default.
		stored := policyJSON(p, true)
		if q, err := ParsePolicyJSON(name, []byte(stored)); err != nil || q.Hot != p.Hot {
			t.Fatalf("stored %s: %+v, %v; want hot %+v", stored, q, err, p.Hot)
		}
	})
}

func checkSet(t *testing.T, s *Set) {
	t.Helper()
	if s.Timeout <= 0 || s.Timeout > MaxTimeout {
		t.Fatalf("Timeout = %v", s.Timeout)
	}
	if len(s.Policies) == 0 || len(s.rules) != len(s.Policies) {
		t.Fatalf("%d policies, %d rules", len(s.Policies), len(s.rules))
	}
	names := map[string]bool{}
	for i, p := range s.Policies {
		if s.rules[i].p != p {
			t.Fatalf("rule %d is not policy %d", i, i)
		}
		if p.Name == "" || names[p.Name] {
			t.Fatalf("policy %d: empty or duplicate name %q", i, p.Name)
		}
		names[p.Name] = true
		if s.Lookup(p.Name) != p {
			t.Fatalf("Lookup(%q) is not policy %d", p.Name, i)
		}
		b, err := p.Bucket()
		if err != nil {
			t.Fatalf("policy %q: Bucket: %v", p.Name, err)
		}
		if b.Capacity <= 0 || b.Capacity >= limit.MaxScaled || b.Refill <= 0 || b.Scale <= 0 {
			t.Fatalf("policy %q: bucket %+v", p.Name, b)
		}
		if p.Algorithm != limit.TokenBucket || p.Period <= 0 || p.Hot.Mode == "" {
			t.Fatalf("policy %q: not normalized: %+v", p.Name, *p)
		}
		if checkFailMode(p.OnStoreError) != "" {
			t.Fatalf("policy %q: on_store_error %q", p.Name, p.OnStoreError)
		}
		if checkShare(p.LocalShare) != "" {
			t.Fatalf("policy %q: local_share %v", p.Name, p.LocalShare)
		}
		switch h := p.Hot; h.Mode {
		case limit.HotOff:
		case limit.HotLease:
			if h.Threshold < 1 {
				t.Fatalf("policy %q: hot %+v", p.Name, h)
			}
		case limit.HotSplit:
			if h.Threshold < 1 || h.Split < 2 || h.Split > MaxSplit {
				t.Fatalf("policy %q: hot %+v", p.Name, h)
			}
		default:
			t.Fatalf("policy %q: hot mode %q", p.Name, h.Mode)
		}
		if strings.Contains(Describe(p), "\n") {
			t.Fatalf("Describe(%q) is not one line", p.Name)
		}
		// A key made of the pattern's literal text is matched by some policy
		// at or before this one (first match wins).
		if lit := s.rules[i].m.lit; s.rules[i].m.kind == kindExact {
			if q := s.Match(lit); q == nil || indexOf(s.Policies, q) > i {
				t.Fatalf("Match(%q) = %v, want policy %d or earlier", lit, q, i)
			}
		}
	}
	// What Parse accepts, NewSet accepts: one set of rules.
	if _, err := NewSet(s.Timeout, s.Policies...); err != nil {
		t.Fatalf("NewSet rejects what Parse accepted: %v", err)
	}
	_ = s.String()
}

func indexOf(ps []*limit.Policy, p *limit.Policy) int {
	for i, q := range ps {
		if q == p {
			return i
		}
	}
	return -1
}
