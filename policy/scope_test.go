package policy

import (
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

func TestParseScopeGlobal(t *testing.T) {
	s, err := Parse([]byte(`defaults:
  on_store_error: closed
  region_floor: 0.25
policies:
  - name: checkout
    match: "checkout:*"
    limit: 1000
    rate: 500
    scope: global
  - name: none
    match: "none:*"
    limit: 10
    rate: 10
    scope: global
    region_floor: 0
  - name: dflt
    match: "*"
    limit: 10
    rate: 10
    scope: global
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, none := s.Policies[0], s.Policies[1]
	if !c.Global() || c.RegionFloor != 0.25 {
		t.Fatalf("checkout: scope %q floor %v, want global 0.25", c.Scope, c.RegionFloor)
	}
	if f := c.Floor(); f == nil || f.Limit != 250 || f.Rate != 125 || f.Global() {
		t.Fatalf("checkout floor policy = %+v, want limit 250 rate 125, regional", f)
	}
	if none.Floor() != nil || none.RegionFloor != limit.NoRegionFloor {
		t.Fatalf("region_floor: 0 → %v (Floor %+v), want none", none.RegionFloor, none.Floor())
	}
	if got := Describe(c); !strings.Contains(got, "scope=global region_floor=0.25") {
		t.Errorf("Describe = %q", got)
	}
	if got := PolicyJSON(none); !strings.Contains(got, `"scope":"global","region_floor":0`) {
		t.Errorf("PolicyJSON = %s", got)
	}
	back, err := ParsePolicyJSON("none", []byte(PolicyJSON(none)))
	if err != nil || back.RegionFloor != limit.NoRegionFloor || !back.Global() {
		t.Fatalf("JSON round trip: %+v, %v", back, err)
	}
	d := &limit.Policy{Name: "d", Limit: 10, Rate: 10, Scope: limit.ScopeGlobal}
	if f := d.Floor(); f == nil || f.Limit != 1 || f.Rate != 1 {
		t.Fatalf("default floor of limit 10 = %+v, want 1/1 (0.1, at least 1)", f)
	}
}

func TestParseScopeErrors(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"scope: planet", `scope: must be one of regional | global, got "planet"`},
		{"region_floor: 1.5", "region_floor: must be from 0 to 1, got 1.5"},
		{"scope: global\n    algorithm: fixed_window", "global needs a bucket algorithm"},
		{"scope: global\n    hot: {mode: lease, threshold: 10}", "must be off when scope is global"},
	} {
		_, err := Parse([]byte("policies:\n  - name: p\n    match: \"*\"\n    limit: 5\n    rate: 5\n    on_store_error: open\n    "+tc.body+"\n"), "s.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}
