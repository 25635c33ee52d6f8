package bench

import (
	"strings"
	"testing"
)

// The doors end to end on a real cluster, at a small count: a row for
// direct EVALSHA, for RL.TAKE by redis-benchmark and for each door, every
// request of a door decided by the store. Nothing here is about speed.
func TestRunFronts(t *testing.T) {
	requireRedisBinaries(t)
	bin := buildSluice(t)
	doors := []string{DoorRESP, DoorHTTP, DoorGRPC}
	rep, err := RunFronts(labCtx(t), FrontConfig{Binary: bin, Doors: doors, Clients: 4, Requests: 400, Keyspace: 1000}, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	md := rep.Markdown()
	t.Logf("report:\n%s", md)
	if rep.Direct.RPS <= 0 || rep.Direct.Door != "direct EVALSHA" {
		t.Errorf("direct row %+v", rep.Direct)
	}
	if len(rep.Rows) != 1+len(doors) {
		t.Fatalf("%d rows, want RL.TAKE and %d doors", len(rep.Rows), len(doors))
	}
	for i, r := range rep.Rows {
		if r.Requests != 400 || r.Store < 400 || !(r.RPS > 0) || r.P99 < r.P50 || !(r.ServiceCPU >= 0) || !(r.RedisCPU >= 0) {
			t.Errorf("row %d %+v: want 400 requests, all by the store, a rate, p99 ≥ p50, sluice's and Redis's CPU read", i, r)
		}
		if i > 0 && r.Door != doors[i-1] {
			t.Errorf("row %d is %s, want %s", i, r.Door, doors[i-1])
		}
		if !strings.Contains(md, "| "+r.Door+" |") {
			t.Errorf("no row for %s in the report", r.Door)
		}
	}
}
