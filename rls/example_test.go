package rls_test

import (
	"fmt"

	"github.com/sluice-rl/sluice/envoycfg"
	"github.com/sluice-rl/sluice/policy"
	"github.com/sluice-rl/sluice/rls"
)

// sluice's own policies match the descriptor's key, domain:key=value…
func ExamplePolicyMatcher() {
	set, err := policy.Parse([]byte(`defaults: {on_store_error: closed}
policies:
  - {name: per-ip, match: "edge:remote_address=*", limit: 100, rate: 100, period: 1m}
`), "sluice.yaml")
	if err != nil {
		panic(err)
	}
	m := rls.PolicyMatcher(set.Match)
	for _, es := range [][]envoycfg.Entry{{{Key: "remote_address", Value: "::1"}}, {{Key: "path", Value: "/"}}} {
		p, _ := m.Match("edge", es)
		fmt.Printf("%s: %v\n", envoycfg.Key("edge", es), p != nil && p.Name == "per-ip")
	}
	// Output:
	// edge:remote_address=%3A%3A1: true
	// edge:path=/: false
}
