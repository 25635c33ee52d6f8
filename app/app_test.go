package app

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestAppLifecycle: the server as a value, in process with the embedded
// store: New, Start on a free port, RL.TAKE by the policy file, Reload
// putting an edited file in force, a bad file leaving it there, Shutdown.
func TestAppLifecycle(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	write := func(policyLimit int, extra string) {
		writeFile(t, file, "timeout: 80ms\n"+onePolicy(policyLimit)+extra)
	}
	write(2, "")
	cfg := Defaults()
	cfg.Listen, cfg.Admin, cfg.PolicyFile = "127.0.0.1:0", "", file
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := a.Start(ctx); err != nil {
		a.Close()
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: a.Addr().String()})
	defer c.Close()
	admitted := func(key string, n int) int {
		t.Helper()
		got := 0
		for range n {
			v, err := c.Do(ctx, "RL.TAKE", key, 1).Slice()
			if err != nil || len(v) == 0 {
				t.Fatalf("RL.TAKE %s: %v, %v", key, v, err)
			}
			if v[0] == int64(1) {
				got++
			}
		}
		return got
	}
	if got := admitted("a", 4); got != 2 {
		t.Errorf("limit 2: %d of 4 admitted", got)
	}
	if got := a.timeout(); got != 80*time.Millisecond {
		t.Errorf("timeout %v, want the file's 80ms", got)
	}
	write(5, "")
	if err := a.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := admitted("b", 7); got != 5 {
		t.Errorf("limit 5 after Reload: %d of 7 admitted", got)
	}
	write(9, "    algorithm: nonesuch\n")
	if err := a.Reload(); err == nil {
		t.Error("Reload of a bad file: no error")
	}
	if got := admitted("c", 7); got != 5 {
		t.Errorf("after a bad Reload: %d of 7 admitted, want the last good limit 5", got)
	}
	cancel()
	if err := a.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
