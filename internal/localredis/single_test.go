package localredis_test

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

func TestSingle(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	ctx := t.Context()
	rdb := n.Client()
	if err := rdb.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Errorf("GET k = %q, %v; want v", got, err)
	}
	if err := rdb.ClusterInfo(ctx).Err(); err == nil {
		t.Error("CLUSTER INFO answered by a plain server")
	}
	oldPid := n.Pid
	if err := n.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if n.Pid == oldPid {
		t.Errorf("Pid unchanged by Restart: %d", n.Pid)
	}
	if got, err := rdb.DBSize(ctx).Result(); err != nil || got != 0 {
		t.Errorf("DBSIZE after Restart = %d, %v; want 0 (no persistence)", got, err)
	}
}

func TestSingleStopRemovesTempDir(t *testing.T) {
	t.Parallel()
	redistest.RequireRedis(t, "", "-")
	n, err := localredis.StartSingle(t.Context(), localredis.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if n.Running() {
		t.Error("Running() = true after Stop")
	}
	if _, err := os.Stat(n.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("temp dir %s after Stop: %v, want it removed", n.Dir, err)
	}
	if err := n.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}
