package client_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/client"
)

// Every example runs against a sluice with these policies (main_test.go):
//
//	api:*  limit 3, 1 token per hour
//	llm:*  limit 10,000, 1 token per hour
//	render:*  concurrency: 2 slots, each freed after 1 minute unless released

func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: sluiceAddr}) // sluice, e.g. 127.0.0.1:6380
	defer rdb.Close()
	rl := client.New(rdb)

	for i := range 4 {
		d, err := rl.Take(context.Background(), "api:alice", 1)
		if err != nil {
			fmt.Println("error:", err) // sluice unreachable, or a bad request: decide what your service does
			return
		}
		if !d.Allowed {
			fmt.Printf("request %d: 429, retry in %s\n", i+1, d.RetryAfter.Round(time.Minute))
			continue
		}
		fmt.Printf("request %d: ok, %d left\n", i+1, d.Remaining)
	}
	// Output:
	// request 1: ok, 2 left
	// request 2: ok, 1 left
	// request 3: ok, 0 left
	// request 4: 429, retry in 1h0m0s
}

func ExampleClient_Take() {
	rdb := redis.NewClient(&redis.Options{Addr: sluiceAddr})
	defer rdb.Close()
	rl := client.New(rdb)
	ctx := context.Background()

	d, _ := rl.Take(ctx, "api:bob", 2)
	fmt.Println(d.Allowed, d.Limit, d.Remaining)
	d, _ = rl.Take(ctx, "api:bob", 2) // 1 left: refused, and nothing spent
	fmt.Println(d.Allowed, d.Remaining, d.Never)
	d, _ = rl.Take(ctx, "api:bob", 5) // over the limit: no wait helps
	fmt.Println(d.Allowed, d.Never)
	// Output:
	// true 3 1
	// false 1 false
	// false true
}

func ExampleClient_Peek() {
	rdb := redis.NewClient(&redis.Options{Addr: sluiceAddr})
	defer rdb.Close()
	rl := client.New(rdb)
	ctx := context.Background()

	_, _ = rl.Take(ctx, "api:carol", 1)
	d, _ := rl.Peek(ctx, "api:carol", 1) // what a take would decide, spending nothing
	fmt.Println(d.Allowed, d.Remaining)
	d, _ = rl.Peek(ctx, "api:carol", 1)
	fmt.Println(d.Allowed, d.Remaining)
	// Output:
	// true 2
	// true 2
}

func ExampleClient_MTake() {
	rdb := redis.NewClient(&redis.Options{Addr: sluiceAddr})
	defer rdb.Close()
	rl := client.New(rdb)
	ctx := context.Background()

	// A request counts against the user's limit and the tenant's, or
	// against neither.
	_, _ = rl.Take(ctx, "api:tenant-acme", 3) // the tenant has spent all it has
	ok, each, _ := rl.MTake(ctx, client.Rule{Key: "api:user-dave", Cost: 1}, client.Rule{Key: "api:tenant-acme", Cost: 1})
	fmt.Println(ok, each[0].Allowed, each[1].Allowed)
	d, _ := rl.Peek(ctx, "api:user-dave", 1)
	fmt.Println("dave still has", d.Remaining)
	// Output:
	// false true false
	// dave still has 3
}

func ExampleClient_Reset() {
	rdb := redis.NewClient(&redis.Options{Addr: sluiceAddr})
	defer rdb.Close()
	rl := client.New(rdb)
	ctx := context.Background()

	_, _ = rl.Take(ctx, "api:erin", 3)
	existed, _ := rl.Reset(ctx, "api:erin") // an admin forgives erin
	d, _ := rl.Take(ctx, "api:erin", 1)
	fmt.Println(existed, d.Allowed, d.Remaining)
	existed, _ = rl.Reset(ctx, "api:nobody")
	fmt.Println(existed)
	// Output:
	// true true 2
	// false
}

func ExampleError() {
	rdb := redis.NewClient(&redis.Options{Addr: sluiceAddr})
	defer rdb.Close()
	rl := client.New(rdb)
	ctx := context.Background()

	_, err := rl.Take(ctx, "nomatch", 1)
	fmt.Println(errors.Is(err, client.ErrNoPolicy))
	_, err = rl.Take(ctx, "api:frank", 0)
	fmt.Println(errors.Is(err, client.ErrInvalid), err)
	_, err = rl.Take(ctx, "render:frank", 1) // a concurrency policy takes Acquire
	fmt.Println(errors.Is(err, client.ErrNotApplicable))
	// Output:
	// true
	// true sluice: ERR cost must be a positive integer
	// true
}

func ExampleClient_Adjust() {
	rdb := redis.NewClient(&redis.Options{Addr: sluiceAddr})
	defer rdb.Close()
	rl := client.New(rdb)
	ctx := context.Background()

	// An LLM call: take an estimate of its tokens at the request, with a
	// receipt that names the take...
	d, _ := rl.TakeWithReceipt(ctx, "llm:acme", 500)
	fmt.Println(d.Allowed, d.Remaining, len(d.Receipt))
	// ...and correct by the difference once the response says it used
	// 800: spending more needs no receipt.
	d, _ = rl.Adjust(ctx, "llm:acme", 800-500, d.Receipt)
	fmt.Println(d.Remaining)
	// The next one used 100 of its estimated 500: give 400 back, naming
	// its take. A receipt gives back once, at most its take's cost.
	est, _ := rl.TakeWithReceipt(ctx, "llm:acme", 500)
	d, _ = rl.Adjust(ctx, "llm:acme", 100-500, est.Receipt)
	fmt.Println(d.Remaining)
	_, err := rl.Adjust(ctx, "llm:acme", -100, est.Receipt)
	fmt.Println(err)
	// Output:
	// true 9500 32
	// 9200
	// 9100
	// sluice: ERR invalid, expired or already used receipt
}

func ExampleClient_Acquire() {
	rdb := redis.NewClient(&redis.Options{Addr: sluiceAddr})
	defer rdb.Close()
	rl := client.New(rdb)
	ctx := context.Background()

	// At most 2 renders of a tenant at once. A slot frees itself after
	// its TTL (here 30 s), so a crashed worker cannot leak it.
	first, _ := rl.Acquire(ctx, "render:acme", 30*time.Second)
	second, _ := rl.Acquire(ctx, "render:acme", 30*time.Second)
	third, _ := rl.Acquire(ctx, "render:acme", 30*time.Second)
	fmt.Println(first.Allowed, second.Allowed, third.Allowed, third.Token == "")
	fmt.Println("retry within the TTL:", third.RetryAfter > 0 && third.RetryAfter <= 30*time.Second)

	held, _ := rl.Release(ctx, "render:acme", first.Token) // the render is done
	again, _ := rl.Release(ctx, "render:acme", first.Token)
	fmt.Println(held, again)
	next, _ := rl.Acquire(ctx, "render:acme", 0) // 0: the policy's period
	fmt.Println(next.Allowed, next.Remaining)
	// Output:
	// true true false true
	// retry within the TTL: true
	// true false
	// true 0
}
