package limiter

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// tagStore is the local store grouped as Redis Cluster groups keys: by
// the hash tag between the first '{' and the next '}', else by the whole
// key. Keys of one tag go to DoAll together, others are taken one group
// at a time and refunded, so a batch can mix both.
type tagStore struct{ *local.Store }

func (s tagStore) Group(key string) int {
	tag := key
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			tag = key[i+1 : i+1+j]
		}
	}
	h := 0
	for _, c := range []byte(tag) {
		h = h*31 + int(c)
	}
	return h
}

// shadowStores are the three ways MTake meets a store: every key in one
// atomic group (the embedded store), every key its own group (keys on
// different slots), and groups by hash tag.
func shadowStores() map[string]func() limit.Store {
	return map[string]func() limit.Store{
		"one group (embedded)": func() limit.Store { return local.New(local.Config{}) },
		"separate groups":      func() limit.Store { return slotStore{local.New(local.Config{})} },
		"hash-tag groups":      func() limit.Store { return tagStore{local.New(local.Config{})} },
	}
}

// winDark is the config: "win" enforces 4 per hour, "dark" is a
// shadow rule of 1 per hour, each with the algorithm given.
func winDark(win, dark limit.Algorithm) MatcherFunc {
	w := &limit.Policy{Name: "win", Algorithm: win, Limit: 4, Rate: 4, Period: time.Hour, OnStoreError: limit.FailClosed}
	d := &limit.Policy{Name: "dark", Algorithm: dark, Limit: 1, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed, Shadow: true}
	return func(key string) *limit.Policy {
		switch {
		case strings.Contains(key, "win:"):
			return w
		case strings.Contains(key, "dark:"):
			return d
		}
		return nil
	}
}

// A shadow rule in an RL.MTAKE never blocks and never unblocks the others:
// `RL.MTAKE win:x 1 dark:x 1` admits exactly as often as win allows, and
// spends win each time, whatever the store's groups and the algorithms.
// The shadow rule is decided apart, as RL.TAKE of it alone would be: it
// takes when it would allow alone, also when the group is refused, and
// reports its own bucket with allowed 1, retry_after -1, decided_by shadow.
func TestMTakeShadowApart(t *testing.T) {
	t.Parallel()
	for name, newStore := range shadowStores() {
		for _, wa := range limit.Algorithms {
			for _, da := range limit.Algorithms {
				t.Run(name+"/win="+string(wa)+"/dark="+string(da), func(t *testing.T) {
					t.Parallel()
					l, err := New(Config{Policies: winDark(wa, da), Store: newStore()})
					if err != nil {
						t.Fatal(err)
					}
					win, dark := "{t}:win:x", "{t}:dark:x"
					admitted := 0
					for i := range 8 {
						ok, out, err := mtake(t, l, win, 1, dark, 1)
						if err != nil {
							t.Fatal(err)
						}
						if ok {
							admitted++
						}
						d := out[1]
						wantRem := int64(0) // the first call takes the shadow rule's one token
						if !d.Allowed || d.RetryAfterMs != -1 || d.DecidedBy != limit.ByShadow || d.Limit != 1 || d.Remaining != wantRem {
							t.Fatalf("call %d: the shadow rule's reply %+v, want allowed, limit 1, remaining %d, retry -1, decided_by shadow", i+1, d, wantRem)
						}
					}
					if got := remaining(t, l, win); admitted != 4 || got != 0 {
						t.Fatalf("8 calls admitted %d, and win holds %d; want 4 admitted and 0 left", admitted, got)
					}
					// Refused by win, the shadow rule still takes, as alone.
					fresh := "{t}:dark:y"
					ok, out, err := mtake(t, l, win, 1, fresh, 1)
					if err != nil || ok || out[0].Allowed || !out[1].Allowed || out[1].Remaining != 0 {
						t.Fatalf("a refused call: ok=%v %+v %v", ok, out, err)
					}
					if got := remaining(t, l, fresh); got != 0 {
						t.Fatalf("the shadow rule of a refused call holds %d, want 0: decided as alone, it took", got)
					}
					// An exhausted shadow rule never blocks.
					if ok, out, err := mtake(t, l, "{t}:win:z", 1, dark, 1); err != nil || !ok || out[0].Remaining != 3 {
						t.Fatalf("a fresh win key beside an exhausted shadow rule: ok=%v %+v %v", ok, out, err)
					}
				})
			}
		}
	}
}

// The same over a batch that mixes groups: two enforced rules and two
// shadow rules, on two hash tags.
func TestMTakeShadowMixedGroups(t *testing.T) {
	t.Parallel()
	l, err := New(Config{Policies: winDark(limit.TokenBucket, limit.GCRA), Store: tagStore{local.New(local.Config{})}})
	if err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 8 {
		ok, _, err := mtake(t, l, "{a}:win:1", 1, "{a}:dark:1", 1, "{b}:dark:2", 1, "{b}:win:2", 1)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			admitted++
		}
	}
	a, b := remaining(t, l, "{a}:win:1"), remaining(t, l, "{b}:win:2")
	if admitted != 4 || a != 0 || b != 0 {
		t.Fatalf("admitted %d, win buckets hold %d and %d; want 4, 0, 0", admitted, a, b)
	}
	if s := l.Snapshot(); s.RefundFails != 0 {
		t.Fatalf("%d refunds failed", s.RefundFails)
	}
}
