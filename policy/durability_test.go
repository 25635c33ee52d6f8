package policy

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

// TestDurability: durability is none unless written, is inherited from
// defaults, round-trips through RL.POLICY's JSON (shown explicit, stored
// only when replica), and any other value is an error naming the file,
// line, policy and field.
func TestDurability(t *testing.T) {
	const cfg = `defaults:
  on_store_error: closed
  durability: replica
policies:
  - name: login
    match: "login:*"
    limit: 20
    rate: 20
    period: 1h
  - name: api
    match: "*"
    limit: 100
    rate: 100
    durability: none
`
	s, err := Parse([]byte(cfg), "sluice.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	got := map[string]limit.Durability{}
	for _, p := range s.Policies {
		got[p.Name] = p.Durability
	}
	// none is the zero value, as written or not.
	if want := (map[string]limit.Durability{"login": limit.DurabilityReplica, "api": ""}); got["login"] != want["login"] || got["api"] != want["api"] {
		t.Errorf("durability = %v, want %v", got, want)
	}
	if d := Describe(s.Policies[0]); !strings.Contains(d, " durability=replica") {
		t.Errorf("Describe = %q, want durability=replica", d)
	}

	for _, tc := range []struct {
		js, want string
		durable  bool
	}{
		{`{"match":"a:*","limit":5,"rate":1,"on_store_error":"open"}`, `"durability":"none"`, false},
		{`{"match":"a:*","limit":5,"rate":1,"on_store_error":"open","durability":"replica"}`, `"durability":"replica"`, true},
	} {
		p, err := ParsePolicyJSON("a", []byte(tc.js))
		if err != nil {
			t.Fatalf("ParsePolicyJSON(%s): %v", tc.js, err)
		}
		if p.Durable() != tc.durable {
			t.Errorf("%s: Durable() = %v, want %v", tc.js, p.Durable(), tc.durable)
		}
		shown := PolicyJSON(p)
		if !strings.Contains(shown, tc.want) {
			t.Errorf("PolicyJSON = %s, want %s", shown, tc.want)
		}
		stored := policyJSON(p, true)
		if got, want := strings.Contains(stored, "durability"), tc.durable; got != want {
			t.Errorf("stored %s: names durability %v, want %v", stored, got, want)
		}
		q, err := ParsePolicyJSON("a", []byte(shown))
		if err != nil || q.Durable() != tc.durable {
			t.Errorf("round trip of %s: durable %v, %v; want %v", shown, q != nil && q.Durable(), err, tc.durable)
		}
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"policy", policyYAML("    durability: wait\n"), `sluice.yaml:8: policy #1 "api": durability: must be one of none | replica, got "wait"`},
		{"defaults", "defaults: {durability: sync}" + ok, `sluice.yaml:1: defaults: durability: must be one of none | replica, got "sync"`},
		{"not a string", policyYAML("    durability: [replica]\n"), `sluice.yaml:8: policy #1 "api": durability: must be a string`},
	} {
		_, err := Parse([]byte(tc.yaml), "sluice.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := ParsePolicyJSON("a", []byte(`{"match":"a:*","limit":5,"rate":1,"on_store_error":"open","durability":"all"}`)); err == nil ||
		!strings.Contains(err.Error(), `policy "a": durability: must be one of none | replica, got "all"`) {
		t.Errorf("JSON durability all: %v", err)
	}
}
