package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// caller makes one decision through a door; each load-generator worker has
// its own, on its own connection.
type caller interface {
	take(ctx context.Context, key string) error
	close()
}

// dialers make a door's callers, by door.
var dialers = map[string]func(addr string) (caller, error){
	DoorRESP: dialRESP,
	DoorHTTP: dialHTTP,
	// PeerGubernator is driven by RunFronts' Peer, not as a door.
	PeerGubernator: dialGubernator,
	// DoorGRPC registers itself in bench_fronts_grpc.go.
}

// driveDoor runs cfg.Requests decisions through door at addr from cfg.Clients
// callers, uniform keys, and measures them.
func driveDoor(ctx context.Context, door, addr string, cfg FrontConfig) (FrontRow, error) {
	callers := make([]caller, cfg.Clients)
	defer func() {
		for _, c := range callers {
			if c != nil {
				c.close()
			}
		}
	}()
	for i := range callers {
		c, err := dialers[door](addr)
		if err != nil {
			return FrontRow{}, err
		}
		callers[i] = c
	}
	lat := make([][]time.Duration, cfg.Clients)
	errs := make([]error, cfg.Clients)
	ctx, cancel := context.WithTimeout(ctx, DefaultRunTimeout)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for w := range cfg.Clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			for i := w; i < cfg.Requests; i += cfg.Clients {
				key := "key:" + strconv.Itoa(rng.IntN(cfg.Keyspace))
				t := time.Now()
				if err := callers[w].take(ctx, key); err != nil {
					errs[w] = err
					return
				}
				lat[w] = append(lat[w], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return FrontRow{}, err
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1e6 }
	return FrontRow{Door: door, Tool: "Go", Requests: len(all), Elapsed: elapsed,
		RPS: float64(len(all)) / elapsed.Seconds(), P50: q(0.5), P99: q(0.99)}, nil
}

// respCaller is RL.TAKE key 1 on a go-redis connection of its own.
type respCaller struct{ c *redis.Client }

func dialRESP(addr string) (caller, error) {
	return respCaller{redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1, MaxRetries: -1, DisableIdentity: true, Protocol: 2})}, nil
}

func (r respCaller) take(ctx context.Context, key string) error {
	v, err := r.c.Do(ctx, "RL.TAKE", key, 1).Slice()
	if err == nil {
		err = checkTake(v)
	}
	return err
}

func (r respCaller) close() { _ = r.c.Close() }
