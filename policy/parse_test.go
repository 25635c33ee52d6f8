package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
)

// designConfig is the config example of the design contract sluice was
// built to, verbatim (docs/configuration.md, "The policy file", shows a
// fuller one).
const designConfig = `timeout: 50ms                 # deadline for every store call
defaults:                     # inherited by every policy below
  on_store_error: local
policies:                     # first match wins
  - name: login
    match: "login:*"          # glob on the key
    algorithm: token_bucket   # token_bucket | gcra | sliding_window | fixed_window
    limit: 5                  # burst capacity, or max requests per window
    rate: 5                   # tokens refilled per period (bucket algorithms)
    period: 1m                # refill period, or window length
    on_store_error: closed    # open | closed | local — required, here or in defaults
    local_share: 1.0          # with ` + "`local`" + `: the fraction of limit and rate this instance admits alone
    shadow: false             # true: decide and count, but always admit (dark launch)
    durability: none          # none | replica: answer a spend only once a replica has it (WAIT)
  - name: api
    match: "*"
    limit: 100
    rate: 50
    period: 1s
    hot:
      mode: lease             # off (default) | lease | split
      threshold: 500          # requests/s on one instance before a key is hot
      split: 8                # K sub-buckets, for mode split
`

func TestParseDesignConfig(t *testing.T) {
	s, err := Parse([]byte(designConfig), "sluice.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []limit.Policy{
		{
			Name: "login", Match: "login:*", Algorithm: limit.TokenBucket,
			Limit: 5, Rate: 5, Period: time.Minute, OnStoreError: limit.FailClosed,
			LocalShare: 1, Hot: limit.Hot{Mode: limit.HotOff, Default: true}, // limit 5: below MinDefaultLeaseLimit
		},
		{
			Name: "api", Match: "*", Algorithm: limit.TokenBucket,
			Limit: 100, Rate: 50, Period: time.Second, OnStoreError: limit.FailLocal,
			LocalShare: 1, Hot: limit.Hot{Mode: limit.HotLease, Threshold: 500, Split: 8},
		},
	}
	if got := derefAll(s.Policies); !reflect.DeepEqual(got, want) {
		t.Errorf("policies:\n got %+v\nwant %+v", got, want)
	}
	if s.Timeout != 50*time.Millisecond {
		t.Errorf("Timeout = %v, want 50ms", s.Timeout)
	}
	if s.Source != "sluice.yaml" {
		t.Errorf("Source = %q, want sluice.yaml", s.Source)
	}
	for _, p := range s.Policies {
		if _, err := p.Bucket(); err != nil {
			t.Errorf("%s: Bucket: %v", p.Name, err)
		}
	}
}

func derefAll(ps []*limit.Policy) []limit.Policy {
	out := make([]limit.Policy, len(ps))
	for i, p := range ps {
		out[i] = *p
	}
	return out
}

// ok is a minimal valid policy list, for tests that vary something else.
const ok = `
policies:
  - {name: a, match: "*", limit: 1, rate: 1, on_store_error: open}
`

func TestParseValid(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       func(*Set) any
		wantVal    any
	}{
		{"timeout absent is 50ms", ok, func(s *Set) any { return s.Timeout }, 50 * time.Millisecond},
		{"timeout 0 is 50ms", "timeout: 0" + ok, func(s *Set) any { return s.Timeout }, 50 * time.Millisecond},
		{"timeout 0s is 50ms", "timeout: 0s" + ok, func(s *Set) any { return s.Timeout }, 50 * time.Millisecond},
		{"timeout 10s", "timeout: 10s" + ok, func(s *Set) any { return s.Timeout }, 10 * time.Second},
		{"timeout 250us", "timeout: 250us" + ok, func(s *Set) any { return s.Timeout }, 250 * time.Microsecond},
		{"period default 1s", ok, func(s *Set) any { return s.Policies[0].Period }, time.Second},
		{"period 1d", "policies: [{name: a, match: x, limit: 1, rate: 1, period: 1d, on_store_error: open}]",
			func(s *Set) any { return s.Policies[0].Period }, 24 * time.Hour},
		{"period 1d12h", "policies: [{name: a, match: x, limit: 1, rate: 1, period: 1d12h, on_store_error: open}]",
			func(s *Set) any { return s.Policies[0].Period }, 36 * time.Hour},
		{"period 500ms", "policies: [{name: a, match: x, limit: 1, rate: 1, period: 500ms, on_store_error: open}]",
			func(s *Set) any { return s.Policies[0].Period }, 500 * time.Millisecond},
		{"period 1us", "policies: [{name: a, match: x, limit: 1, rate: 3000000, period: 1us, on_store_error: open}]",
			func(s *Set) any { return s.Policies[0].Period }, time.Microsecond},
		{"limit 1_000 and hex", "policies: [{name: a, match: x, limit: 1_000, rate: 0x10, on_store_error: open}]",
			func(s *Set) any { return [2]int64{s.Policies[0].Limit, s.Policies[0].Rate} }, [2]int64{1000, 16}},
		{"deny_cache default on", ok, func(s *Set) any { return s.Policies[0].NoDenyCache }, false},
		{"deny_cache false", "defaults: {deny_cache: false}\npolicies: [{name: a, match: x, limit: 1, rate: 1, on_store_error: open}]",
			func(s *Set) any { return s.Policies[0].NoDenyCache }, true},
		{"deny_cache true over defaults", "defaults: {deny_cache: false}\npolicies: [{name: a, match: x, limit: 1, rate: 1, on_store_error: open, deny_cache: true}]",
			func(s *Set) any { return s.Policies[0].NoDenyCache }, false},
		{"local_share int 1", "policies: [{name: a, match: x, limit: 1, rate: 1, local_share: 1, on_store_error: local}]",
			func(s *Set) any { return s.Policies[0].LocalShare }, 1.0},
		{"local_share .25", "policies: [{name: a, match: x, limit: 1, rate: 1, local_share: .25, on_store_error: local}]",
			func(s *Set) any { return s.Policies[0].LocalShare }, 0.25},
		{"algorithm default", ok, func(s *Set) any { return s.Policies[0].Algorithm }, limit.TokenBucket},
		{"hot default off below 32", ok, func(s *Set) any { return s.Policies[0].Hot }, limit.Hot{Mode: limit.HotOff, Default: true}},
		{"hot split", "policies: [{name: a, match: x, limit: 1, rate: 1, on_store_error: open, hot: {mode: split, threshold: 9, split: 64}}]",
			func(s *Set) any { return s.Policies[0].Hot }, limit.Hot{Mode: limit.HotSplit, Threshold: 9, Split: 64}},
		{"hot off ignores threshold", "policies: [{name: a, match: x, limit: 1, rate: 1, on_store_error: open, hot: {mode: off, threshold: 9}}]",
			func(s *Set) any { return s.Policies[0].Hot }, limit.Hot{Mode: limit.HotOff, Threshold: 9}},
		{"on_overload unset", ok, func(s *Set) any { return s.Policies[0].OnOverload }, limit.FailMode("")},
		{"on_overload open", "policies: [{name: a, match: x, limit: 1, rate: 1, on_store_error: open, on_overload: open}]",
			func(s *Set) any { return s.Policies[0].OverloadMode() }, limit.FailOpen},
		{"on_overload by default local for open", "policies: [{name: a, match: x, limit: 1, rate: 1, on_store_error: open}]",
			func(s *Set) any { return s.Policies[0].OverloadMode() }, limit.FailLocal},
		{"on_overload by default closed for closed", "policies: [{name: a, match: x, limit: 1, rate: 1, on_store_error: closed}]",
			func(s *Set) any { return s.Policies[0].OverloadMode() }, limit.FailClosed},
		{"on_overload from defaults", "defaults: {on_overload: closed}\npolicies: [{name: a, match: x, limit: 1, rate: 1, on_store_error: open}]",
			func(s *Set) any { return s.Policies[0].OverloadMode() }, limit.FailClosed},
		{"shadow", "policies: [{name: a, match: x, limit: 1, rate: 1, on_store_error: open, shadow: true}]",
			func(s *Set) any { return s.Policies[0].Shadow }, true},
		{"null is unset", "defaults: {limit: 7}\npolicies: [{name: a, match: x, limit: ~, rate: 1, on_store_error: open, hot: null}]",
			func(s *Set) any { return s.Policies[0].Limit }, int64(7)},
		{"anchors and aliases", "defaults: {limit: &n 5}\npolicies: [{name: a, match: x, rate: *n, on_store_error: open}]",
			func(s *Set) any { return s.Policies[0].Rate }, int64(5)},
		{"comments only around", "# sluice\n" + ok + "# end\n", func(s *Set) any { return len(s.Policies) }, 1},
		{"escaped star is literal", `policies: [{name: a, match: "a\\*", limit: 1, rate: 1, on_store_error: open}, {name: b, match: "a*", limit: 1, rate: 1, on_store_error: open}]`,
			func(s *Set) any { return len(s.Policies) }, 2},
		{"rate 1 per day, limit 104249", "policies: [{name: a, match: x, limit: 104249, rate: 1, period: 1d, on_store_error: open}]",
			func(s *Set) any { return s.Policies[0].Limit }, int64(104249)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.yaml), "sluice.yaml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := tt.want(s); !reflect.DeepEqual(got, tt.wantVal) {
				t.Errorf("got %#v, want %#v", got, tt.wantVal)
			}
		})
	}
}

// policyYAML is a valid policy with one line replaced or added by the tests.
func policyYAML(extra string) string {
	return "defaults:\n  on_store_error: open\npolicies:\n  - name: api\n    match: \"api:*\"\n    limit: 10\n    rate: 5\n" + extra
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string // lines of the error, in order; all must appear
	}{
		// Unknown fields at every level.
		{"unknown top", "limits: 5" + ok, []string{`sluice.yaml:1: unknown field "limits" (want one of timeout, defaults, policies)`}},
		{"unknown top typo", "timout: 5ms" + ok, []string{`sluice.yaml:1: unknown field "timout" (did you mean "timeout"?)`}},
		{"unknown defaults", "defaults: {limt: 5}" + ok, []string{`sluice.yaml:1: defaults: unknown field "limt" (did you mean "limit"?)`}},
		{"unknown policy", policyYAML("    limt: 5\n"), []string{`sluice.yaml:8: policy #1 "api": unknown field "limt" (did you mean "limit"?)`}},
		{"unknown hot", policyYAML("    hot:\n      mde: lease\n"), []string{`sluice.yaml:9: policy #1 "api": hot: unknown field "mde" (did you mean "mode"?)`}},
		{"merge key", "base: &b {limit: 1}\n" + ok, []string{`sluice.yaml:1: unknown field "base"`}},
		{"merge key in policy", "policies:\n  - <<: {limit: 1}\n    name: a\n    match: a\n    limit: 1\n    rate: 1\n    on_store_error: open\n",
			[]string{`sluice.yaml:2: policy #1 "a": unknown field "<<" (YAML merge keys are not supported; use defaults)`}},
		{"name in defaults", "defaults: {name: x}" + ok, []string{`sluice.yaml:1: defaults: name: not allowed in defaults: every policy sets its own`}},
		{"match in defaults", "defaults: {match: x}" + ok, []string{`sluice.yaml:1: defaults: match: not allowed in defaults: every policy sets its own`}},
		{"duplicate field", policyYAML("    limit: 11\n"), []string{`sluice.yaml:8: policy #1 "api": limit: set twice (first at line 6)`}},

		// Required fields.
		{"missing on_store_error", "policies:\n  - name: login\n    match: \"login:*\"\n    limit: 5\n    rate: 5\n",
			[]string{`sluice.yaml:2: policy #1 "login": on_store_error: required (open | closed | local), set it here or in defaults`}},
		{"missing name", "policies:\n  - match: x\n    limit: 1\n    rate: 1\n    on_store_error: open\n",
			[]string{`sluice.yaml:2: policy #1: name: required: a unique name for the policy`}},
		{"missing match", "policies:\n  - name: a\n    limit: 1\n    rate: 1\n    on_store_error: open\n",
			[]string{`sluice.yaml:2: policy #1 "a": match: required: a glob on the key, such as "api:*"`}},
		{"missing limit and rate", "policies:\n  - {name: a, match: x, on_store_error: open}\n", []string{
			`sluice.yaml:2: policy #1 "a": limit: required: the burst capacity, a positive integer`,
			`sluice.yaml:2: policy #1 "a": rate: required: tokens refilled per period, a positive integer`,
		}},
		{"no policies", "timeout: 1s\n", []string{`sluice.yaml:1: policies: at least one policy is required`}},
		{"empty policies", "policies: []\n", []string{`sluice.yaml:1: policies: at least one policy is required`}},
		{"empty file", "", []string{`sluice.yaml: the config is empty: want timeout, defaults and policies`}},
		{"split for split", policyYAML("    hot: {mode: split, threshold: 5}\n"),
			[]string{`sluice.yaml:4: policy #1 "api": hot.split: required when hot.mode is split: the number of sub-buckets, 2 to 64`}},

		// Bad values.
		{"negative limit", "defaults: {on_store_error: open}\npolicies:\n  - {name: x, match: x, limit: 1, rate: 1}\n  - name: api\n    match: y\n    limit: -5\n    rate: 1\n",
			[]string{`sluice.yaml:6: policy #2 "api": limit: must be a positive integer, got -5`}},
		{"zero rate", "defaults: {on_store_error: open}\npolicies: [{name: a, match: x, limit: 1, rate: 0}]",
			[]string{`sluice.yaml:2: policy #1 "a": rate: must be a positive integer, got 0`}},
		{"quoted limit", "defaults: {on_store_error: open}\npolicies: [{name: a, match: x, limit: \"5\", rate: 1}]",
			[]string{`sluice.yaml:2: policy #1 "a": limit: must be a positive integer, got "5"`}},
		{"float limit", "defaults: {on_store_error: open}\npolicies: [{name: a, match: x, limit: 5.5, rate: 1}]",
			[]string{`sluice.yaml:2: policy #1 "a": limit: must be a positive integer, got 5.5`}},
		{"huge limit", "defaults: {on_store_error: open}\npolicies: [{name: a, match: x, limit: 99999999999999999999, rate: 1}]",
			[]string{`sluice.yaml:2: policy #1 "a": limit: must be a positive integer, got 99999999999999999999`}},
		{"limit above 2^53", "defaults: {on_store_error: open}\npolicies: [{name: a, match: x, limit: 9007199254740993, rate: 1}]",
			[]string{`sluice.yaml:2: policy #1 "a": limit: must be at most 2^53 (9007199254740992), got 9007199254740993`}},
		{"limit is a list", "defaults: {on_store_error: open}\npolicies: [{name: a, match: x, limit: [1], rate: 1}]",
			[]string{`sluice.yaml:2: policy #1 "a": limit: must be a positive integer, got a list`}},
		{"bad on_store_error", policyYAML("    on_store_error: reject\n"),
			[]string{`sluice.yaml:8: policy #1 "api": on_store_error: must be one of open | closed | local, got "reject"`}},
		{"local_share 0", policyYAML("    local_share: 0\n"),
			[]string{`sluice.yaml:8: policy #1 "api": local_share: must be greater than 0 and at most 1, got 0`}},
		{"local_share 1.5", policyYAML("    local_share: 1.5\n"),
			[]string{`sluice.yaml:8: policy #1 "api": local_share: must be greater than 0 and at most 1, got 1.5`}},
		{"local_share nan", policyYAML("    local_share: .nan\n"),
			[]string{`sluice.yaml:8: policy #1 "api": local_share: must be a number, got .nan`}},
		{"local_share string", policyYAML("    local_share: half\n"),
			[]string{`sluice.yaml:8: policy #1 "api": local_share: must be a number, got "half"`}},
		{"shadow yes", policyYAML("    shadow: yes\n"),
			[]string{`sluice.yaml:8: policy #1 "api": shadow: must be true or false, got "yes"`}},
		{"hot mode", policyYAML("    hot: {mode: always}\n"),
			[]string{`sluice.yaml:8: policy #1 "api": hot.mode: must be one of off | lease | split, got "always"`}},
		{"hot split 1", policyYAML("    hot: {mode: split, threshold: 5, split: 1}\n"),
			[]string{`sluice.yaml:8: policy #1 "api": hot.split: must be an integer from 2 to 64, got 1`}},
		{"hot split 65", policyYAML("    hot: {mode: split, threshold: 5, split: 65}\n"),
			[]string{`sluice.yaml:8: policy #1 "api": hot.split: must be an integer from 2 to 64, got 65`}},
		{"hot threshold 0", policyYAML("    hot: {mode: lease, threshold: 0}\n"),
			[]string{`sluice.yaml:8: policy #1 "api": hot.threshold: must be a positive integer, got 0`}},
		{"hot not a mapping", policyYAML("    hot: lease\n"),
			[]string{`sluice.yaml:8: policy #1 "api": hot: must be a mapping of mode, threshold and split, got "lease"`}},
		{"name with space", "defaults: {on_store_error: open}\npolicies: [{name: my api, match: x, limit: 1, rate: 1}]",
			[]string{`sluice.yaml:2: policy #1 "my api": name: must not contain spaces or control characters, got "my api"`}},
		{"policy not a mapping", "policies:\n  - api\n", []string{`sluice.yaml:2: policy #1: must be a mapping of policy fields, got "api"`}},
		{"policies not a list", "policies: {name: a}\n", []string{`sluice.yaml:1: policies: must be a list of policies, got a mapping`}},
		{"defaults not a mapping", "defaults: open\n" + ok, []string{`sluice.yaml:1: defaults: must be a mapping of policy fields, got "open"`}},
		{"top not a mapping", "- a\n- b\n", []string{`sluice.yaml:1: the config must be a mapping of timeout, defaults and policies, got a list`}},

		// Durations.
		{"period without unit", policyYAML("    period: 60\n"), []string{`sluice.yaml:8: policy #1 "api": period: needs a unit, such as 60s, got 60`}},
		{"period garbage", policyYAML("    period: soon\n"),
			[]string{`sluice.yaml:8: policy #1 "api": period: must be a duration such as 500ms, 1s, 1m, 1h or 1d, got "soon"`}},
		{"period negative", policyYAML("    period: -1s\n"), []string{`sluice.yaml:8: policy #1 "api": period: must be positive, got -1s`}},
		{"period zero", policyYAML("    period: 0s\n"), []string{`sluice.yaml:8: policy #1 "api": period: must be positive, got 0s`}},
		{"period sub-microsecond", policyYAML("    period: 1500ns\n"),
			[]string{`sluice.yaml:8: policy #1 "api": period: must be a whole number of microseconds, got 1.5µs`}},
		{"period 1.5d", policyYAML("    period: 1.5d\n"),
			[]string{`sluice.yaml:8: policy #1 "api": period: must be a duration such as 500ms, 1s, 1m, 1h or 1d, got "1.5d"`}},
		{"period overflow", policyYAML("    period: 999999999d\n"),
			[]string{`sluice.yaml:8: policy #1 "api": period: must be a duration such as 500ms, 1s, 1m, 1h or 1d, got "999999999d"`}},
		{"timeout too long", "timeout: 11s" + ok, []string{`sluice.yaml:1: timeout: must be between 0 (meaning 50ms) and 10s, got 11s`}},
		{"timeout negative", "timeout: -1ms" + ok, []string{`sluice.yaml:1: timeout: must be between 0 (meaning 50ms) and 10s, got -1ms`}},
		{"timeout no unit", "timeout: 50" + ok, []string{`sluice.yaml:1: timeout: needs a unit, such as 50s, got 50`}},

		// Algorithms.
		{"unknown algorithm", policyYAML("    algorithm: leaky\n"), []string{
			`sluice.yaml:8: policy #1 "api": algorithm: unknown algorithm "leaky", want token_bucket | gcra | sliding_window | fixed_window | concurrency`}},
		{"gcra without rate", "defaults: {on_store_error: open}\npolicies:\n  - name: g\n    match: x\n    algorithm: gcra\n    limit: 5\n",
			[]string{`sluice.yaml:3: policy #1 "g": rate: required: tokens refilled per period, a positive integer`}},
		{"hot lease on a window", policyYAML("    algorithm: fixed_window\n    hot: {mode: lease, threshold: 10}\n"),
			[]string{`sluice.yaml:9: policy #1 "api": hot.mode: lease needs a bucket algorithm (token_bucket or gcra), not fixed_window`}},
		{"sliding window too precise", "defaults: {on_store_error: open}\npolicies:\n  - name: s\n    match: x\n    algorithm: sliding_window\n    limit: 100000000000\n    period: 1d\n",
			[]string{`sluice.yaml:7: policy #1 "s": period: sliding_window limit 100000000000 per 24h0m0s needs more than 53 bits of precision; use a shorter period, or a period of whole seconds`}},

		// Exact representability.
		{"unrepresentable", "defaults: {on_store_error: open}\npolicies:\n  - name: big\n    match: x\n    limit: 1000000000\n    rate: 7\n    period: 1h\n",
			[]string{`sluice.yaml:7: policy #1 "big": period: limit 1000000000 with 7 per 1h0m0s needs more than 53 bits of precision; use a shorter period or a rate that divides it`}},

		// Names, globs and order.
		{"duplicate name", "defaults: {on_store_error: open}\npolicies:\n  - {name: a, match: x, limit: 1, rate: 1}\n  - {name: a, match: y, limit: 1, rate: 1}\n",
			[]string{`sluice.yaml:4: policy #2 "a": name: "a" is already the name of policy #1 "a" (line 3)`}},
		{"unreachable after catch-all", "defaults: {on_store_error: open}\npolicies:\n  - {name: all, match: \"*\", limit: 1, rate: 1}\n  - {name: b, match: \"b:*\", limit: 1, rate: 1}\n",
			[]string{`sluice.yaml:4: policy #2 "b": match: never used: policy #1 "all" (line 3), with match "*", comes first and matches every key that "b:*" does`}},
		{"unreachable after prefix", "defaults: {on_store_error: open}\npolicies:\n  - {name: a, match: \"a:*\", limit: 1, rate: 1}\n  - {name: b, match: \"a:b\", limit: 1, rate: 1}\n",
			[]string{`sluice.yaml:4: policy #2 "b": match: never used: policy #1 "a" (line 3), with match "a:*", comes first and matches every key that "a:b" does`}},
		{"unterminated class", "defaults: {on_store_error: open}\npolicies: [{name: a, match: \"api:[ab\", limit: 1, rate: 1}]",
			[]string{`sluice.yaml:2: policy #1 "a": match: unterminated [ at byte 4 of "api:[ab"`}},
		{"empty class", "defaults: {on_store_error: open}\npolicies: [{name: a, match: \"[]\", limit: 1, rate: 1}]",
			[]string{`sluice.yaml:2: policy #1 "a": match: empty [] class at byte 0 of "[]"`}},
		{"trailing backslash", "defaults: {on_store_error: open}\npolicies: [{name: a, match: 'a\\', limit: 1, rate: 1}]",
			[]string{`sluice.yaml:2: policy #1 "a": match: trailing \ escapes nothing in "a\\" (write \\ for a backslash)`}},
		{"empty match", "defaults: {on_store_error: open}\npolicies: [{name: a, match: '', limit: 1, rate: 1}]",
			[]string{`sluice.yaml:2: policy #1 "a": match: must not be empty`}},

		// YAML syntax.
		{"bad indentation", "policies:\n  - name: a\n   match: x\n", []string{`sluice.yaml:1: invalid YAML: did not find expected '-' indicator`}},
		{"tab", "policies:\n\t- name: a\n", []string{`sluice.yaml:2: invalid YAML: found character that cannot start any token`}},
		{"two documents", ok + "---\n" + ok, []string{`sluice.yaml:4: only one YAML document is allowed, found another`}},
		{"unclosed flow", "policies: [{name: a\n", []string{`sluice.yaml:1: invalid YAML: did not find expected ',' or '}'`}},
		{"duplicate top key", ok + ok, []string{`sluice.yaml:5: policies: set twice (first at line 2)`}},

		// Defaults: a bad default is reported once, not again per policy.
		{"bad default once", "defaults: {on_store_error: maybe}\npolicies:\n  - {name: a, match: x, limit: 1, rate: 1}\n  - {name: b, match: y, limit: 1, rate: 1}\n",
			[]string{`sluice.yaml:1: defaults: on_store_error: must be one of open | closed | local, got "maybe"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Parse([]byte(tt.yaml), "sluice.yaml")
			if err == nil {
				t.Fatalf("Parse = %v, want an error", s)
			}
			if s != nil {
				t.Errorf("Parse returned a Set with an error")
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(tt.want) {
				t.Errorf("got %d error lines, want %d:\n%s", len(got), len(tt.want), err)
			}
			for i, want := range tt.want {
				if i >= len(got) || !strings.HasPrefix(got[i], want) {
					t.Errorf("error line %d:\n got %s\nwant %s", i, at(got, i), want)
				}
			}
			var e *Error
			if !errors.As(err, &e) || e.File != "sluice.yaml" {
				t.Errorf("errors.As(*Error) = %v, %+v; want an *Error naming the file", errors.As(err, &e), e)
			}
		})
	}
}

func at(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return "(none)"
}

func TestParseErrorsAllReportedInFileOrder(t *testing.T) {
	yaml := `timeout: 20s
policies:
  - name: a
    match: "a:*"
    limit: 0
  - name: b
    match: "b:*"
    limit: 1
    rate: 1
    on_store_error: never
`
	_, err := Parse([]byte(yaml), "x.yaml")
	want := `x.yaml:1: timeout: must be between 0 (meaning 50ms) and 10s, got 20s
x.yaml:3: policy #1 "a": rate: required: tokens refilled per period, a positive integer
x.yaml:3: policy #1 "a": on_store_error: required (open | closed | local), set it here or in defaults
x.yaml:5: policy #1 "a": limit: must be a positive integer, got 0
x.yaml:10: policy #2 "b": on_store_error: must be one of open | closed | local, got "never"`
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
	// Deterministic: the same input gives the same text every time.
	for range 20 {
		if _, err2 := Parse([]byte(yaml), "x.yaml"); err2.Error() != err.Error() {
			t.Fatalf("error text changed between runs:\n%v\n%v", err, err2)
		}
	}
}

func TestParseErrorsCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("policies:\n")
	for range 30 {
		b.WriteString("  - {}\n")
	}
	_, err := Parse([]byte(b.String()), "f.yaml")
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != maxErrors+1 || !strings.HasPrefix(lines[maxErrors], "… and ") {
		t.Errorf("got %d lines ending %q, want %d errors and a count", len(lines), lines[len(lines)-1], maxErrors)
	}
}

func TestParseTooLarge(t *testing.T) {
	_, err := Parse(make([]byte, MaxConfigBytes+1), "big.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), "big.yaml: the config is ") {
		t.Errorf("got %v, want a size error naming the file", err)
	}
}

func TestDefaultsInheritance(t *testing.T) {
	yaml := `defaults:
  algorithm: token_bucket
  limit: 10
  rate: 2
  period: 1m
  on_store_error: closed
  local_share: 0.5
  shadow: true
  hot: {mode: split, threshold: 100, split: 4}
policies:
  - name: inherit
    match: "i:*"
  - name: override
    match: "o:*"
    limit: 20
    rate: 1
    period: 1s
    on_store_error: open
    local_share: 1
    shadow: false
    hot: {split: 8}
  - name: hot-off
    match: "h:*"
    hot: {mode: off}
`
	s, err := Parse([]byte(yaml), "d.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []limit.Policy{
		{Name: "inherit", Match: "i:*", Algorithm: limit.TokenBucket, Limit: 10, Rate: 2, Period: time.Minute,
			OnStoreError: limit.FailClosed, LocalShare: 0.5, Shadow: true, Hot: limit.Hot{Mode: limit.HotSplit, Threshold: 100, Split: 4}},
		{Name: "override", Match: "o:*", Algorithm: limit.TokenBucket, Limit: 20, Rate: 1, Period: time.Second,
			OnStoreError: limit.FailOpen, LocalShare: 1, Shadow: false, Hot: limit.Hot{Mode: limit.HotSplit, Threshold: 100, Split: 8}},
		{Name: "hot-off", Match: "h:*", Algorithm: limit.TokenBucket, Limit: 10, Rate: 2, Period: time.Minute,
			OnStoreError: limit.FailClosed, LocalShare: 0.5, Shadow: true, Hot: limit.Hot{Mode: limit.HotOff, Threshold: 100, Split: 4}},
	}
	if got := derefAll(s.Policies); !reflect.DeepEqual(got, want) {
		t.Errorf("policies:\n got %+v\nwant %+v", got, want)
	}
}

func TestParsePolicyJSON(t *testing.T) {
	p, err := ParsePolicyJSON("login", []byte(`{"match": "login:*", "limit": 5, "rate": 5, "period": "1m",
		"on_store_error": "closed", "local_share": 0.5, "shadow": true, "hot": {"mode": "lease", "threshold": 50}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := limit.Policy{Name: "login", Match: "login:*", Algorithm: limit.TokenBucket, Limit: 5, Rate: 5, Period: time.Minute,
		OnStoreError: limit.FailClosed, LocalShare: 0.5, Shadow: true, Hot: limit.Hot{Mode: limit.HotLease, Threshold: 50}}
	if !reflect.DeepEqual(*p, want) {
		t.Errorf("got %+v\nwant %+v", *p, want)
	}

	base := `"match": "x", "limit": 1, "rate": 1, "on_store_error": "open"`
	tests := []struct{ name, json, want string }{
		{"unknown field", `{` + base + `, "limt": 5}`, `policy "p": unknown field "limt" (did you mean "limit"?)`},
		{"missing on_store_error", `{"match": "x", "limit": 1, "rate": 1}`, `policy "p": on_store_error: required (open | closed | local), set it here or in defaults`},
		{"string limit", `{"match": "x", "limit": "1", "rate": 1, "on_store_error": "open"}`, `policy "p": limit: must be a positive integer, got "1"`},
		{"float limit", `{"match": "x", "limit": 1.0, "rate": 1, "on_store_error": "open"}`, `policy "p": limit: must be a positive integer, got 1.0`},
		{"duplicate", `{` + base + `, "limit": 2}`, `policy "p": limit: set twice`},
		{"name disagrees", `{` + base + `, "name": "q"}`, `policy "p": name: "q" does not agree with the policy name "p"`},
		{"leaky", `{` + base + `, "algorithm": "leaky"}`, `policy "p": algorithm: unknown algorithm "leaky", want token_bucket | gcra | sliding_window | fixed_window | concurrency`},
		{"numeric period", `{` + base + `, "period": 60}`, `policy "p": period: needs a unit, such as 60s, got 60`},
		{"on_overload", `{` + base + `, "on_overload": "shut"}`, `policy "p": on_overload: must be one of open | closed | local, got "shut"`},
		{"hot lease window", `{` + base + `, "algorithm": "fixed_window", "hot": {"mode": "lease"}}`, `policy "p": hot.mode: lease needs a bucket algorithm`},
		{"not an object", `[1]`, `policy "p": must be a JSON object of policy fields, got a list`},
		{"syntax", `{"match": }`, `policy "p": invalid JSON: invalid character '}' looking for beginning of value`},
		{"trailing", `{` + base + `} {}`, `policy "p": invalid JSON: unexpected data after the object`},
		{"empty", ``, `policy "p": invalid JSON: unexpected EOF`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ParsePolicyJSON("p", []byte(tt.json))
			if err == nil {
				t.Fatalf("got %+v, want an error", p)
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.want) || strings.Contains(got, "\n") {
				t.Errorf("got  %s\nwant %s (one line)", got, tt.want)
			}
		})
	}
}

func TestNewSet(t *testing.T) {
	good := &limit.Policy{Name: "a", Match: "a:*", Limit: 1, Rate: 1, OnStoreError: limit.FailOpen}
	s, err := NewSet(0, good)
	if err != nil {
		t.Fatal(err)
	}
	want := limit.Policy{Name: "a", Match: "a:*", Algorithm: limit.TokenBucket, Limit: 1, Rate: 1, Period: time.Second,
		OnStoreError: limit.FailOpen, LocalShare: 1, Hot: limit.Hot{Mode: limit.HotOff, Default: true}}
	if p := s.Match("a:1"); s.Timeout != limit.DefaultTimeout || p == nil || *p != want || s.Match("b") != nil {
		t.Errorf("NewSet(0, good) = %+v, want timeout 50ms and %+v", s, want)
	}
	if _, err := s.Policies[0].Bucket(); err != nil {
		t.Errorf("a zero period was not filled in: %v", err)
	}
	if *good != (limit.Policy{Name: "a", Match: "a:*", Limit: 1, Rate: 1, OnStoreError: limit.FailOpen}) {
		t.Errorf("NewSet modified its policy: %+v", *good)
	}

	tests := []struct {
		name     string
		timeout  time.Duration
		policies []*limit.Policy
		want     string
	}{
		{"nil policy", 0, []*limit.Policy{nil}, `policy #1: is nil`},
		{"timeout", time.Minute, []*limit.Policy{good}, `timeout: must be between 0 (meaning 50ms) and 10s, got 1m`},
		{"bad period", 0, []*limit.Policy{{Name: "p", Match: "x", Limit: 1, Rate: 1, Period: time.Nanosecond, OnStoreError: limit.FailOpen}},
			`policy #1 "p": period: must be a whole number of microseconds, got 1ns`},
		{"bad glob", 0, []*limit.Policy{{Name: "p", Match: "[", Limit: 1, Rate: 1, OnStoreError: limit.FailOpen}},
			`policy #1 "p": match: unterminated [ at byte 0 of "["`},
		{"duplicate", 0, []*limit.Policy{good, {Name: "a", Match: "b", Limit: 1, Rate: 1, OnStoreError: limit.FailOpen}},
			`policy #2 "a": name: "a" is already the name of policy #1 "a"`},
		{"bad algorithm", 0, []*limit.Policy{{Name: "p", Match: "x", Algorithm: "leaky", Limit: 1, Rate: 1, OnStoreError: limit.FailOpen}},
			`policy #1 "p": algorithm: unknown algorithm "leaky", want token_bucket | gcra | sliding_window | fixed_window | concurrency`},
		{"negative share", 0, []*limit.Policy{{Name: "p", Match: "x", Limit: 1, Rate: 1, OnStoreError: limit.FailLocal, LocalShare: -1}},
			`policy #1 "p": local_share: must be greater than 0 and at most 1, got -1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSet(tt.timeout, tt.policies...)
			if err == nil || err.Error() != tt.want {
				t.Errorf("got  %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	s := Default()
	want := limit.Policy{Name: "default", Match: "*", Algorithm: limit.TokenBucket, Limit: 100, Rate: 50, Period: time.Second,
		OnStoreError: limit.FailLocal, LocalShare: 1, Hot: limit.Hot{Mode: limit.HotLease, Threshold: limit.DefaultHotThreshold, Default: true}}
	if len(s.Policies) != 1 || *s.Policies[0] != want {
		t.Fatalf("Default().Policies = %+v, want [%+v]", derefAll(s.Policies), want)
	}
	if s.Timeout != limit.DefaultTimeout || s.Source != "built-in" {
		t.Errorf("Timeout, Source = %v, %q; want %v, built-in", s.Timeout, s.Source, limit.DefaultTimeout)
	}
	for _, key := range []string{"x", "login:1", "", "\xff"} {
		if s.Match(key) != s.Policies[0] {
			t.Errorf("Default().Match(%q) = nil", key)
		}
	}
	wantText := "built-in: 1 policy, first match wins, store timeout 50ms\n" +
		`  default match="*" token_bucket limit=100 rate=50/1s on_store_error=local local_share=1 hot=lease(threshold=500/s) (default)`
	if got := s.String(); got != wantText {
		t.Errorf("String:\n got %s\nwant %s", got, wantText)
	}
}

func TestString(t *testing.T) {
	s, err := Parse([]byte(strings.Replace(designConfig, `match: "*"`, `match: "api:*"`, 1)+`  - name: big
    match: "big:*"
    limit: 1
    rate: 1
    period: 1d
    shadow: true
    local_share: 0.25
    hot: {mode: split, threshold: 9, split: 8}
`), "sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := `sluice.yaml: 3 policies, first match wins, store timeout 50ms
  login match="login:*" token_bucket limit=5 rate=5/1m on_store_error=closed local_share=1 hot=off
  api match="api:*" token_bucket limit=100 rate=50/1s on_store_error=local local_share=1 hot=lease(threshold=500/s)
  big match="big:*" token_bucket limit=1 rate=1/1d on_store_error=local local_share=0.25 shadow hot=split(threshold=9/s,k=8)`
	if got := s.String(); got != want {
		t.Errorf("String:\n got %s\nwant %s", got, want)
	}
}

func TestLookup(t *testing.T) {
	s, err := Parse([]byte(designConfig), "sluice.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Lookup("api"); p == nil || p.Name != "api" {
		t.Errorf("Lookup(api) = %v", p)
	}
	if p := s.Lookup("nope"); p != nil {
		t.Errorf("Lookup(nope) = %v, want nil", p)
	}
	var nilSet *Set
	if nilSet.Lookup("api") != nil || nilSet.Match("api") != nil {
		t.Error("a nil Set matched something")
	}
}

func TestDurations(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"1s", time.Second, true},
		{"1m", time.Minute, true},
		{"1h", time.Hour, true},
		{"24h", 24 * time.Hour, true},
		{"1d", 24 * time.Hour, true},
		{"7d", 7 * 24 * time.Hour, true},
		{"1d1h", 25 * time.Hour, true},
		{"0d", 0, true},
		{"d", 0, false},
		{"1d-1h", 0, false},
		{"1d+1h", 0, false},
		{"-1d", 0, false},
		{"1.5d", 0, false},
		{"106751d", 106751 * 24 * time.Hour, true},
		{"106752d", 0, false},
		{"106751d23h59m", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseDuration(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseDuration(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
		if ok && got > 0 {
			if back, _ := parseDuration(formatDuration(got)); back != got {
				t.Errorf("formatDuration(%v) = %q does not read back", got, formatDuration(got))
			}
		}
	}
}
