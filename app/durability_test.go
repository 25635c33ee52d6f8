package app

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/redistest"
)

const durableYAML = "policies:\n  - name: login\n    match: \"*\"\n    limit: 5\n    rate: 1\n    period: 1h\n    on_store_error: closed\n    durability: %s\n"

// TestEmbeddedRefusesDurability: the embedded store has no replica, so
// durability: replica is a config error at start, on reload (the last
// good config stays) and by RL.POLICY SET, naming the file, the policy
// and the field.
func TestEmbeddedRefusesDurability(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	write := func(d string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(fmt.Sprintf(durableYAML, d)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const want = `policy "login": durability: replica needs a Redis store with replicas; the embedded store has none`
	cfg := Defaults()
	cfg.Listen, cfg.Admin, cfg.PolicyFile = "127.0.0.1:0", "", file
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))

	write("replica")
	if a, err := New(t.Context(), cfg); err == nil {
		a.Close()
		t.Fatal("New: no error for durability: replica on the embedded store")
	} else if !strings.Contains(err.Error(), file+": "+want) {
		t.Errorf("New: %v, want %q", err, file+": "+want)
	}

	write("none")
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
	defer func() {
		cancel()
		_ = a.Shutdown(context.Background())
	}()
	write("replica")
	if err := a.Reload(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Reload: %v, want %q", err, want)
	}
	if p := a.holder.Current().Lookup("login"); p == nil || p.Durable() {
		t.Errorf("after the refused reload: %+v, want the last good policy", p)
	}
	c := redis.NewClient(&redis.Options{Addr: a.Addr().String()})
	defer c.Close()
	err = c.Do(ctx, "RL.POLICY", "SET", "d", `{"match":"d:*","limit":5,"rate":1,"on_store_error":"open","durability":"replica"}`).Err()
	if err == nil || !strings.Contains(err.Error(), `policy "d": durability: replica needs a Redis store with replicas`) {
		t.Errorf("RL.POLICY SET: %v, want the durability error", err)
	}
}

// TestDurabilityWarnsWithoutReplica: a single Redis with no replica takes
// durability: replica, with a warning at start naming the primary; its
// durable spends are answered by on_store_error and counted in INFO and
// sluice_durability_unacked_total.
func TestDurabilityWarnsWithoutReplica(t *testing.T) {
	t.Parallel()
	n := redistest.NewSingle(t)
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(durableYAML, "replica")), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	cfg := Defaults()
	cfg.Listen, cfg.Admin, cfg.PolicyFile, cfg.Redis = "127.0.0.1:0", "", file, n.Addr
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
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
	defer func() {
		cancel()
		_ = a.Shutdown(context.Background())
	}()
	if got := logs.String(); !strings.Contains(got, "no replica is connected") || !strings.Contains(got, n.Addr) {
		t.Errorf("start-up log without the warning naming %s:\n%s", n.Addr, got)
	}
	c := redis.NewClient(&redis.Options{Addr: a.Addr().String()})
	defer c.Close()
	v, err := c.Do(ctx, "RL.TAKE", "k", 1).Slice()
	if err != nil || len(v) != 6 || v[0] != int64(0) || v[5] != "fallback-closed" {
		t.Errorf("RL.TAKE: %v %v, want refused by fallback-closed", v, err)
	}
	info, err := c.Do(ctx, "INFO").Text()
	if err != nil || !strings.Contains(info, "durability_unacked:1\r\n") {
		t.Errorf("INFO: %v, want durability_unacked:1 in\n%s", err, info)
	}
	var out bytes.Buffer
	mfs, err := a.m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_durability_unacked_total" {
			for _, m := range mf.GetMetric() {
				fmt.Fprintf(&out, "%s=%v ", m.GetLabel()[0].GetValue(), m.GetCounter().GetValue())
			}
		}
	}
	if got, want := out.String(), "login=1 "; got != want {
		t.Errorf("sluice_durability_unacked_total: %q, want %q", got, want)
	}
}
