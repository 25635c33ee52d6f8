package server

import (
	"context"
	"reflect"
	"testing"
	"time"
)

func TestHotKeys(t *testing.T) {
	t.Parallel()
	since := time.UnixMilli(1_764_500_000_000)
	_, addr := start(t, Config{HotKeys: func() []HotKey {
		return []HotKey{{Key: "acme", Policy: "api", Mode: "lease", Rate: 5230.4, Since: since}}
	}})
	got, err := client(t, addr).Do(context.Background(), "RL.HOTKEYS").Slice()
	if err != nil {
		t.Fatal(err)
	}
	want := []any{[]any{"key", "acme", "policy", "api", "mode", "lease", "rate", "5230", "since_ms", int64(1_764_500_000_000)}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RL.HOTKEYS = %#v, want %#v", got, want)
	}

	_, bare := start(t, Config{})
	got, err = client(t, bare).Do(context.Background(), "RL.HOTKEYS").Slice()
	if err != nil || len(got) != 0 {
		t.Fatalf("RL.HOTKEYS without a lister = %v, %v; want an empty array", got, err)
	}
	if err := client(t, bare).Do(context.Background(), "RL.HOTKEYS", "x").Err(); err == nil {
		t.Fatal("RL.HOTKEYS x: want a wrong-number-of-arguments error")
	}
}
