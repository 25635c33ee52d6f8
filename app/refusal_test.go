package app

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/sluice-rl/sluice/internal/acl"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/metrics"
)

// Every door's refusals reach ACL LOG; countRefusal counts each in
// sluice_errors_total by the door (the entry's context), the policy of a
// refused key (matched, never the key itself) and the kind.
func TestCountRefusal(t *testing.T) {
	t.Parallel()
	m := metrics.New("test")
	api := &limit.Policy{Name: "api"}
	match := limiter.MatcherFunc(func(key string) *limit.Policy {
		if key == "api:1" {
			return api
		}
		return nil
	})
	log := acl.NewLog(0)
	log.Notify(countRefusal(m, match))
	for _, e := range []acl.Entry{
		{Reason: acl.ReasonKey, Context: "toplevel", Object: "api:1", Username: "acme"},
		{Reason: acl.ReasonKey, Context: "toplevel", Object: "api:1", Username: "acme"}, // merged in ACL LOG, counted twice here
		{Reason: acl.ReasonKey, Context: "http", Object: "api:1", Username: "acme"},
		{Reason: acl.ReasonKey, Context: "grpc", Object: "other", Username: "acme"},
		{Reason: acl.ReasonCommand, Context: "toplevel", Object: "rl.policy", Username: "acme"},
		{Reason: acl.ReasonAuth, Context: "toplevel", Object: "AUTH", Username: "eve"},
	} {
		log.Add(e, e.Created)
	}
	got := map[string]float64{}
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_errors_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			got[refusalLabels(s)] += s.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"front=resp policy=api kind=noperm": 2,
		"front=http policy=api kind=noperm": 1,
		"front=grpc policy= kind=noperm":    1,
		"front=resp policy= kind=noperm":    1,
		"front=resp policy= kind=auth":      1,
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("errors_total{%s} = %v, want %v", k, got[k], v)
		}
	}
}

func refusalLabels(s *dto.Metric) string {
	v := map[string]string{}
	for _, lp := range s.GetLabel() {
		v[lp.GetName()] = lp.GetValue()
	}
	return "front=" + v["front"] + " policy=" + v["policy"] + " kind=" + v["kind"]
}
