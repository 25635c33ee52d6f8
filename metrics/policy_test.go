package metrics

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
)

// Past MaxPolicyLabels distinct policy names, every new name is counted
// under OtherPolicy, in every family: the label set stays bounded however
// many policies RL.POLICY adds, and no count is lost.
func TestPolicyLabelsBounded(t *testing.T) {
	t.Parallel()
	m := New("test")
	n := MaxPolicyLabels + 50
	for i := range n {
		p := &limit.Policy{Name: fmt.Sprintf("p%d", i)}
		m.Decision("resp", p, &limit.Result{Allowed: true, DecidedBy: limit.ByStore})
		m.DecisionError("resp", p, limit.ErrReceiptInvalid)
		m.Correction("resp", p, limiter.CorrectionSpend, limit.ByStore, 2)
	}
	m.Decision("resp", nil, &limit.Result{DecidedBy: limit.ByStore}) // "" is not a policy: never OtherPolicy
	for _, name := range []string{"sluice_decisions_total", "sluice_errors_total", "sluice_corrections_total", "sluice_correction_tokens_total"} {
		values := labelValues(t, m.reg, name, "policy")
		named := 0
		for v := range values {
			if v != OtherPolicy && v != "" {
				named++
			}
		}
		if named != MaxPolicyLabels || !values[OtherPolicy] {
			t.Errorf("%s: %d named policy values and %s present %v, want %d and true", name, named, OtherPolicy, values[OtherPolicy], MaxPolicyLabels)
		}
	}
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"sluice_decisions_total", float64(n + 1)},
		{"sluice_errors_total", float64(n)},
		{"sluice_corrections_total", float64(n)},
		{"sluice_correction_tokens_total", float64(2 * n)},
	} {
		if got := sum(t, m.reg, tc.name); got != tc.want {
			t.Errorf("sum of %s = %v, want %v (nothing lost past the bound)", tc.name, got, tc.want)
		}
	}
	if got := sum(t, m.reg, "sluice_decisions_total", "policy", OtherPolicy); got != 50 {
		t.Errorf("decisions under %q = %v, want 50", OtherPolicy, got)
	}
	if got := sum(t, m.reg, "sluice_decisions_total", "policy", "p0"); got != 1 {
		t.Errorf("decisions of p0, the first policy, = %v, want 1 (kept its own series)", got)
	}
}

func TestCorrections(t *testing.T) {
	t.Parallel()
	m := New("test")
	api := &limit.Policy{Name: "api"}
	llm := &limit.Policy{Name: "llm"}
	m.Correction("resp", llm, limiter.CorrectionSpend, limit.ByStore, 500)
	m.Correction("resp", llm, limiter.CorrectionGiveBack, limit.ByStore, 300)
	m.Correction("http", llm, limiter.CorrectionGiveBack, limit.ByStore, 20)
	m.Correction("resp", llm, limiter.CorrectionGiveBackFailed, limit.ByFallbackClosed, 0)
	m.Correction("resp", api, limiter.CorrectionRefund, limit.ByStore, 1)
	m.Correction("resp", api, limiter.CorrectionRelease, "", 0)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"sluice_corrections_total", []string{"front", "resp", "policy", "llm", "kind", limiter.CorrectionGiveBack, "decided_by", "store"}, 1},
		{"sluice_corrections_total", []string{"policy", "llm", "kind", limiter.CorrectionGiveBack}, 2},
		{"sluice_corrections_total", []string{"policy", "llm", "kind", limiter.CorrectionGiveBackFailed, "decided_by", "fallback-closed"}, 1},
		{"sluice_corrections_total", []string{"policy", "api", "kind", limiter.CorrectionRelease, "decided_by", ""}, 1},
		{"sluice_corrections_total", []string{"policy", "api"}, 2},
		{"sluice_correction_tokens_total", []string{"policy", "llm", "kind", limiter.CorrectionSpend}, 500},
		{"sluice_correction_tokens_total", []string{"policy", "llm", "kind", limiter.CorrectionGiveBack}, 320},
		{"sluice_correction_tokens_total", []string{"policy", "llm", "kind", limiter.CorrectionGiveBackFailed}, 0},
		{"sluice_correction_tokens_total", []string{"policy", "api", "kind", limiter.CorrectionRefund}, 1},
	} {
		if got := sum(t, m.reg, tc.name, tc.labels...); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}

// sum adds the values of every series of name whose labels include
// labels (pairs), as PromQL's sum(name{labels}) would.
func sum(t *testing.T, g prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, s := range mf.GetMetric() {
			have := map[string]string{}
			for _, lp := range s.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue series
				}
			}
			total += s.GetCounter().GetValue()
		}
	}
	return total
}

// labelValues returns the values label takes in the series of name.
func labelValues(t *testing.T, g prometheus.Gatherer, name, label string) map[string]bool {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] = true
				}
			}
		}
	}
	return out
}

func BenchmarkDecisionError(b *testing.B) {
	m := New("bench")
	p := &limit.Policy{Name: "api"}
	err := limit.ErrReceiptInvalid
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.DecisionError("resp", p, err)
		}
	})
}

func BenchmarkCorrection(b *testing.B) {
	m := New("bench")
	p := &limit.Policy{Name: "llm"}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Correction("resp", p, limiter.CorrectionGiveBack, limit.ByStore, 300)
		}
	})
}
