package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// TestExchangeOnACluster: boards of keys on different nodes are written,
// pruned and read back in one call, beside their buckets' slots, and
// expire.
func TestExchangeOnACluster(t *testing.T) {
	c := redistest.NewCluster(t, localredis.Config{Primaries: 3, Replicas: -1})
	s, err := New(Config{Addrs: c.Addrs(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	keys := []string{"a", "b", "{acme}:c", "d}e"}
	slots := map[int]bool{}
	for _, k := range keys[:3] {
		if Slot(BoardKey(k)) != Slot(Key(k)) {
			t.Errorf("board of %q on slot %d, its bucket on %d", k, Slot(BoardKey(k)), Slot(Key(k)))
		}
		slots[Slot(BoardKey(k))] = true
	}
	if len(slots) < 3 {
		t.Fatalf("keys on %d slots, want them spread", len(slots))
	}
	vals := []string{"1", "2", "3", "4"}
	if _, err := s.Exchange(ctx, keys, "eu/x", vals, nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := s.Exchange(ctx, keys, "us/y", vals, [][]string{{"eu/x"}, nil, nil, nil}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(got[0]) != 1 || got[0]["us/y"] != "1" {
		t.Errorf("board a = %v, want only us/y (eu/x dropped)", got[0])
	}
	for i := 1; i < len(keys); i++ {
		if len(got[i]) != 2 || got[i]["eu/x"] != vals[i] || got[i]["us/y"] != vals[i] {
			t.Errorf("board %q = %v", keys[i], got[i])
		}
	}
	ttl, err := c.ClusterClient().PTTL(ctx, BoardKey("b")).Result()
	if err != nil || ttl <= 0 || ttl > 2*time.Second {
		t.Errorf("board TTL %v, %v; want the last write's 2s", ttl, err)
	}
}
