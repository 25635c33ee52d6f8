package bench

import (
	"slices"
	"strings"
	"testing"
)

func TestResolveDefaults(t *testing.T) {
	t.Parallel()
	c, err := Config{}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if c.Clients != 50 || c.Keyspace != 1_000_000 || c.Rounds != 2 || c.Warmup != DefaultWarmup || c.Threads != 1 ||
		!slices.Equal(c.Pipelines, []int{1, 16}) || !slices.Equal(c.Scenarios, []Scenario{Uniform, Hot}) {
		t.Errorf("defaults = %+v", c)
	}
	if got := c.requests(1); got != 200_000 {
		t.Errorf("requests(1) = %d, want 200000", got)
	}
	if got := c.requests(16); got != 1_000_000 {
		t.Errorf("requests(16) = %d, want 1000000", got)
	}

	q, err := Config{Quick: true}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if q.requests(1) != QuickRequests || q.requests(16) != QuickRequests || q.Rounds != 1 || q.Warmup != QuickWarmup {
		t.Errorf("quick = %+v", q)
	}
	q, err = Config{Quick: true, Requests: 7, Rounds: 3, Warmup: -1}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	if q.requests(16) != 7 || q.Rounds != 3 || q.Warmup != 0 {
		t.Errorf("quick with explicit fields = %+v", q)
	}
}

func TestResolveErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Clients: -1}, "clients"},
		{Config{Pipelines: []int{1, 0}}, "pipeline"},
		{Config{Requests: -5}, "requests"},
		{Config{Keyspace: -1}, "keyspace"},
		{Config{Rounds: -1}, "rounds"},
		{Config{Threads: -1}, "threads"},
		{Config{Warmup: -2}, "warmup"},
		{Config{Scenarios: []Scenario{"zipf"}}, `"zipf"`},
		{Config{SluiceAddr: "127.0.0.1:6380"}, "Cluster"},
	}
	for _, tt := range tests {
		_, err := tt.cfg.resolve()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("resolve(%+v) = %v, want an error about %s", tt.cfg, err, tt.want)
		}
	}
}
