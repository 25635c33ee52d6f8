package delayproxy_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/delayproxy"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// A cluster client seeded with the proxies finds only proxies in the slot
// map and in MOVED, so every command it sends pays the delay; Close gives
// the cluster back as it was.
func TestClusterClientCrossesTheProxies(t *testing.T) {
	t.Parallel()
	rc := redistest.NewCluster(t, localredis.Config{Primaries: 3, Replicas: 1})
	ctx := t.Context()
	const oneWay = 20 * time.Millisecond
	// Clients named region-eu travel the link "eu": a cluster client
	// sends its name (HELLO 3 … SETNAME) first on every connection.
	classify := func(first []byte) string {
		if bytes.Contains(first, []byte("region-eu")) {
			return "eu"
		}
		return ""
	}
	pc, err := delayproxy.ProxyClusterConfig(ctx, rc, delayproxy.Config{Delay: oneWay, Classify: classify})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = pc.Close()
		}
	})
	seeds := pc.Seeds()
	if len(seeds) != len(rc.Nodes()) {
		t.Fatalf("%d seeds for %d nodes", len(seeds), len(rc.Nodes()))
	}

	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: seeds, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		ReadTimeout: slack, WriteTimeout: slack,
	})
	defer cc.Close()
	shards, err := localredis.Shards(ctx, cc)
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range shards {
		for _, addr := range sh.Nodes {
			if !slices.Contains(seeds, addr) {
				t.Errorf("CLUSTER SHARDS through a proxy names %s for slots %v; want one of the proxies %v", addr, sh.Slots, seeds)
			}
		}
	}

	// Keys on every primary: each command crosses a proxy.
	for i := range 12 {
		key := fmt.Sprintf("key:%d", i)
		began := time.Now()
		if err := cc.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took < 2*oneWay {
			t.Errorf("SET %s took %v, want at least %v", key, took, 2*oneWay)
		}
		began = time.Now()
		if err := cc.Get(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(began); took < 2*oneWay {
			t.Errorf("GET %s took %v, want at least %v", key, took, 2*oneWay)
		}
		owner, err := rc.PrimaryForKey(ctx, key)
		if err == nil {
			t.Errorf("PrimaryForKey(%s) = %s while proxied, want an error (the nodes announce the proxies)", key, owner.Addr)
		}
	}
	for _, p := range pc.Proxies() {
		if p.Delay() != oneWay {
			t.Errorf("proxy %s: delay %v, want %v", p.Addr(), p.Delay(), oneWay)
		}
	}

	// A command sent to the wrong node is MOVED to a proxy.
	wrong := redis.NewClient(&redis.Options{Addr: seeds[0], Protocol: 2, DisableIdentity: true, MaxRetries: -1})
	defer wrong.Close()
	moved := 0
	for i := range 30 {
		err := wrong.Get(ctx, fmt.Sprintf("key:%d", i)).Err()
		if err == nil || err == redis.Nil {
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "MOVED ") {
			t.Fatalf("GET through %s: %v", seeds[0], err)
		}
		moved++
		if to := msg[strings.LastIndexByte(msg, ' ')+1:]; !slices.Contains(seeds, to) {
			t.Errorf("%q: the MOVED address is not one of the proxies %v", msg, seeds)
		}
	}
	if moved == 0 {
		t.Errorf("no GET of 30 keys through %s was MOVED; the test must reach other primaries", seeds[0])
	}

	// Stalled, the cluster client times out.
	pc.Stall(true)
	short := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: seeds, Protocol: 2, DisableIdentity: true, MaxRetries: -1,
		DialTimeout: 300 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
	})
	defer short.Close()
	if err := short.Get(ctx, "key:1").Err(); !isTimeout(err) {
		t.Errorf("GET through stalled proxies: %v, want a timeout", err)
	}
	pc.Stall(false)

	// Cut one link: its clients fail at once, the others go on.
	named := func(name string) *redis.ClusterClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: seeds, Protocol: 3, ClientName: name, DisableIdentity: true, MaxRetries: -1,
			ReadTimeout: slack, WriteTimeout: slack,
		})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	eu, other := named("region-eu"), named("region-us")
	for _, c := range []*redis.ClusterClient{eu, other} {
		if err := c.Get(ctx, "key:1").Err(); err != nil {
			t.Fatal(err)
		}
	}
	pc.Link("eu").Cut(true)
	for i := range 12 {
		key := fmt.Sprintf("key:%d", i)
		if err := eu.Get(ctx, key).Err(); err == nil || isTimeout(err) {
			t.Errorf("GET %s on the cut link: %v, want a reset or EOF", key, err)
		}
		if err := other.Get(ctx, key).Err(); err != nil {
			t.Errorf("GET %s of another client while eu is cut: %v", key, err)
		}
	}
	pc.Link("eu").Cut(false)
	if err := eu.Get(ctx, "key:1").Err(); err != nil {
		t.Errorf("GET on the eu link after the cut: %v", err)
	}

	closed = true
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	// The nodes announce their own ports again: the cluster is as it was.
	if err := rc.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	direct, err := localredis.Shards(ctx, rc.Nodes()[0].Client())
	if err != nil {
		t.Fatal(err)
	}
	for _, sh := range direct {
		for _, addr := range sh.Nodes {
			if rcHas(rc, addr) == nil {
				t.Errorf("after Close, CLUSTER SHARDS names %s for slots %v, not a node", addr, sh.Slots)
			}
		}
	}
	if _, err := rc.PrimaryForKey(context.Background(), "key:1"); err != nil {
		t.Errorf("PrimaryForKey after Close: %v", err)
	}
}

func rcHas(rc *localredis.Cluster, addr string) *localredis.Node {
	for _, n := range rc.Nodes() {
		if n.Addr == addr {
			return n
		}
	}
	return nil
}
