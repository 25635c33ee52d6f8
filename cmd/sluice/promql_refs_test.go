package main

import (
	"reflect"
	"testing"
)

func TestParsePromRefs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, expr string
		want       promRefs
	}{
		{"bare metric", "up", promRefs{Metrics: []string{"up"}}},
		{"comparison", `up{job="sluice"} == 0`, promRefs{Metrics: []string{"up"}, Matchers: []promMatch{{"up", "job", "=", "sluice"}}}},
		{"rate by", `sum by (policy, result) (rate(sluice_decisions_total{policy=~"$policy"}[$__rate_interval]))`, promRefs{
			Metrics:  []string{"sluice_decisions_total"},
			Matchers: []promMatch{{"sluice_decisions_total", "policy", "=~", "$policy"}},
			Grouping: []string{"policy", "result"},
			Calls:    []string{"sum", "rate"},
		}},
		{"by after the aggregation", `sum(rate(sluice_errors_total[5m])) by (kind)`, promRefs{
			Metrics: []string{"sluice_errors_total"}, Grouping: []string{"kind"}, Calls: []string{"sum", "rate"},
		}},
		{"histogram quantile", `histogram_quantile(0.99, sum by (node, le) (rate(sluice_store_latency_seconds_bucket[5m]))) > 0.04`, promRefs{
			Metrics:  []string{"sluice_store_latency_seconds_bucket"},
			Grouping: []string{"node", "le"},
			Calls:    []string{"histogram_quantile", "sum", "rate"},
		}},
		{"several matchers, a negative one, single quotes", `sluice_store_errors_total{kind!~"moved_ask|noscript", node='a:1'}`, promRefs{
			Metrics: []string{"sluice_store_errors_total"},
			Matchers: []promMatch{
				{"sluice_store_errors_total", "kind", "!~", "moved_ask|noscript"},
				{"sluice_store_errors_total", "node", "=", "a:1"},
			},
		}},
		{"division with ignoring and group_left", `a_x / ignoring(decided_by) group_left sum without (decided_by) (b_y)`, promRefs{
			Metrics: []string{"a_x", "b_y"}, Grouping: []string{"decided_by", "decided_by"}, Calls: []string{"sum"},
		}},
		{"on and group_right with labels", `a * on (node) group_right (kind) b`, promRefs{
			Metrics: []string{"a", "b"}, Grouping: []string{"node", "kind"},
		}},
		{"subquery and offset", `max_over_time(sluice_hot_keys[10m:1m] offset 5m) > 0`, promRefs{
			Metrics: []string{"sluice_hot_keys"}, Calls: []string{"max_over_time"},
		}},
		{"bare matcher", `{__name__="sluice_policies"}`, promRefs{Matchers: []promMatch{{"", "__name__", "=", "sluice_policies"}}}},
		{"numbers and and/or/unless", `sluice_a > 1e3 and sluice_b < .5 or sluice_c unless sluice_d == bool 1`, promRefs{
			Metrics: []string{"sluice_a", "sluice_b", "sluice_c", "sluice_d"},
		}},
		{"escaped quote, Inf", `sluice_a{x="a\"b"} < +Inf`, promRefs{Metrics: []string{"sluice_a"}, Matchers: []promMatch{{"sluice_a", "x", "=", `a"b`}}}},
		{"grafana braces variable", `rate(sluice_a[${__rate_interval}])`, promRefs{Metrics: []string{"sluice_a"}, Calls: []string{"rate"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePromRefs(tc.expr)
			if err != nil {
				t.Fatalf("parsePromRefs(%q): %v", tc.expr, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parsePromRefs(%q)\n got %+v\nwant %+v", tc.expr, got, tc.want)
			}
		})
	}
}

// What the extractor cannot read is an error, never a silent pass.
func TestParsePromRefsErrors(t *testing.T) {
	t.Parallel()
	for _, expr := range []string{
		`sluice_a{job="x"`,
		`sluice_a{job}`,
		`sluice_a{job=x}`,
		`sum by policy (sluice_a)`,
		`sum by (policy (sluice_a)`,
		`rate(sluice_a[5m)`,
		`sluice_a{x="unterminated}`,
		`sluice_a @ 1`,
	} {
		if got, err := parsePromRefs(expr); err == nil {
			t.Errorf("parsePromRefs(%q) = %+v, want an error", expr, got)
		}
	}
}
