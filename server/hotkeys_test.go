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

func TestRegions(t *testing.T) {
	t.Parallel()
	_, addr := start(t, Config{Regions: func() []Region {
		return []Region{
			{Name: "eu", Self: true, Keys: 2, Held: 40, Claimed: 900, Returned: 10, Demand: 312.46, LastHomeContact: 1_764_500_000_000},
			{Name: "us", Keys: 1, Held: 5, Claimed: 100, Demand: 80, LastHomeContact: -1},
		}
	}})
	got, err := client(t, addr).Do(context.Background(), "RL.REGIONS").Slice()
	if err != nil {
		t.Fatal(err)
	}
	want := []any{
		[]any{"region", "eu", "self", int64(1), "keys", int64(2), "held", int64(40), "claimed", int64(900), "returned", int64(10), "demand", "312.5", "last_home_contact_ms", int64(1_764_500_000_000)},
		[]any{"region", "us", "self", int64(0), "keys", int64(1), "held", int64(5), "claimed", int64(100), "returned", int64(0), "demand", "80.0", "last_home_contact_ms", int64(-1)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RL.REGIONS = %#v, want %#v", got, want)
	}
	_, bare := start(t, Config{})
	err = client(t, bare).Do(context.Background(), "RL.REGIONS").Err()
	if err == nil || err.Error() != string(errNoRegion) {
		t.Fatalf("RL.REGIONS without a region: %v, want %q", err, errNoRegion)
	}
}
