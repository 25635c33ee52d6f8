package httpfront

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

// Decisions made through the HTTP door say so, for the metrics' front
// label.
func TestRequestsCarryTheHTTPFront(t *testing.T) {
	var front atomic.Value
	s := newServer(t, Config{Decider: deciderFunc(func(ctx context.Context, reqs []limit.Request, out []limit.Result) {
		front.Store(limit.FrontOf(ctx))
		for i := range out {
			out[i] = limit.Result{Allowed: true, Limit: 1, Remaining: 1, DecidedBy: limit.ByStore}
		}
	})})
	addr := serveOn(t, s)
	resp, err := http.Get("http://" + addr + "/v1/check?key=k")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || front.Load() != "http" {
		t.Errorf("status %d, front %v; want 200 and http", resp.StatusCode, front.Load())
	}
}
