package limiter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// OnError names the policy a request was refused under, also for the
// requests Decide takes out of the batch (a refused receipt, a
// concurrency policy), and OnCorrection hears each correction with its
// policy, kind, path and tokens.
func TestHooksPolicyOfErrorsAndCorrections(t *testing.T) {
	t.Parallel()
	llm := &limit.Policy{Name: "llm", Limit: 100, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	tiny := &limit.Policy{Name: "tiny", Limit: 1, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	slots := &limit.Policy{Name: "slots", Algorithm: limit.Concurrency, Limit: 2, Period: time.Minute, OnStoreError: limit.FailClosed}
	match := MatcherFunc(func(key string) *limit.Policy {
		switch key[0] {
		case 'l':
			return llm
		case 't':
			return tiny
		case 's':
			return slots
		}
		return nil
	})
	var mu sync.Mutex
	var heard []string
	store := local.New(local.Config{DecidedBy: limit.ByStore})
	// slotStore (multi_test.go) is not limit.Atomic: a refused RL.MTAKE
	// is taken key by key and refunded, as across Redis slots.
	l, err := New(Config{Policies: match, Store: slotStore{store}, Slots: store,
		OnError: func(front string, p *limit.Policy, err error) {
			name := "<nil>"
			if p != nil {
				name = p.Name
			}
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, fmt.Sprintf("error %s %s %v", front, name, errors.Is(err, limit.ErrReceipt)))
		},
		OnCorrection: func(front string, p *limit.Policy, kind, by string, tokens int64) {
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, fmt.Sprintf("%s %s %s %q %d", kind, front, p.Name, by, tokens))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	decide := func(ctx context.Context, r limit.Request) limit.Result {
		t.Helper()
		out := make([]limit.Result, 1)
		l.Decide(ctx, []limit.Request{r}, out)
		return out[0]
	}
	took := decide(ctx, limit.Request{Key: "l:1", Cost: 5, WantReceipt: true})
	if !took.Allowed || took.Receipt == "" {
		t.Fatalf("take with a receipt: %+v", took)
	}
	decide(ctx, limit.Request{Key: "l:1", Op: limit.OpAdjust, Cost: -5, Receipt: took.Receipt})
	decide(limit.WithFront(ctx, "http"), limit.Request{Key: "l:1", Op: limit.OpAdjust, Cost: -5, Receipt: took.Receipt}) // reused
	decide(ctx, limit.Request{Key: "l:1", Op: limit.OpAdjust, Cost: -1})                                                 // no receipt: refused before the store
	decide(ctx, limit.Request{Key: "l:1", Op: limit.OpAdjust, Cost: 7})
	decide(ctx, limit.Request{Key: "s:1", Cost: 1}) // a rate command on a concurrency policy
	decide(ctx, limit.Request{Key: "nomatch", Cost: 1})
	decide(ctx, limit.Request{Key: "t:1", Cost: 1}) // tiny is empty now
	ok, err := l.MTake(ctx, []limit.Request{{Key: "l:2", Cost: 3}, {Key: "t:1", Cost: 1}}, make([]limit.Result, 2))
	if ok || err != nil {
		t.Fatalf("MTake over an empty bucket: %v %v, want refused", ok, err)
	}
	res, token := l.Acquire(ctx, "s:1", 0)
	if !res.Allowed {
		t.Fatalf("acquire: %+v", res)
	}
	for range 2 {
		if _, err := l.Release(ctx, "s:1", token); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		`give_back resp llm "store" 5`,
		"error http llm true", // the reused receipt came in by http
		"error resp llm true",
		`spend resp llm "store" 7`,
		"error resp slots false",
		"error resp <nil> false",
		`mtake_refund resp llm "store" 3`,
		`release resp slots "" 0`,
		`release_unknown resp slots "" 0`,
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(heard, want) {
		t.Errorf("hooks heard\n%q\nwant\n%q", heard, want)
	}
}
