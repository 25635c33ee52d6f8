package cluster

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/limit"
)

func totals(s *Store) (pipelines, commands int64) {
	for _, n := range s.Stats() {
		pipelines += n.Pipelines
		commands += n.Commands
	}
	return pipelines, commands
}

// Concurrent batches from many callers share pipelines; a lone request is
// one pipeline of one command, sent without waiting for company.
func TestConcurrentCallersSharePipelines(t *testing.T) {
	t.Parallel()
	node := redistest.NewSingle(t)
	s, err := New(Config{URL: "redis://" + node.Addr, Timeout: 5 * time.Second, Pipelines: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	p := &limit.Policy{Limit: 1000, Rate: 1, Period: time.Hour}
	warm := make([]limit.Result, 1)
	s.Do(ctx, []limit.Request{{Key: "warm", Cost: 1, Policy: p}}, warm) // loads the script
	p0, c0 := totals(s)

	const callers, each = 64, 50
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			out := make([]limit.Result, 1)
			for i := range each {
				s.Do(ctx, []limit.Request{{Key: "share:" + strconv.Itoa(c), Cost: 1, Policy: p}}, out)
				if out[0].Err != nil || !out[0].Allowed || out[0].Remaining != int64(1000-i-1) {
					t.Errorf("caller %d take %d: %+v", c, i, out[0])
					return
				}
			}
		})
	}
	wg.Wait()
	pipes, cmds := totals(s)
	pipes, cmds = pipes-p0, cmds-c0
	t.Logf("%d callers × %d takes: %d commands in %d pipelines (%.1f per pipeline)", callers, each, cmds, pipes, float64(cmds)/float64(pipes))
	if cmds != callers*each {
		t.Fatalf("%d commands sent, want %d", cmds, callers*each)
	}
	if pipes >= cmds {
		t.Fatalf("no batching: %d pipelines for %d commands", pipes, cmds)
	}

	out := make([]limit.Result, 1)
	s.Do(ctx, []limit.Request{{Key: "lone", Cost: 1, Policy: p}}, out)
	p2, c2 := totals(s)
	if out[0].Err != nil || p2-p0-pipes != 1 || c2-c0-cmds != 1 {
		t.Fatalf("lone request: %+v, %d pipelines and %d commands sent", out[0], p2-p0-pipes, c2-c0-cmds)
	}
}
