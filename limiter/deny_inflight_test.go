package limiter

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/denycache"
	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// midFlightStore is a seenStore that, once the store has decided a take
// of key and before the limiter sees the reply, runs during: another
// client's command landing while the refusal is in flight.
type midFlightStore struct {
	*seenStore
	key    string
	during func()
}

func (s *midFlightStore) Do(ctx context.Context, reqs []limit.Request, out []limit.Result) {
	s.seenStore.Do(ctx, reqs, out)
	for i := range reqs {
		if reqs[i].Op == limit.OpTake && reqs[i].Key == s.key && s.during != nil {
			var wg sync.WaitGroup
			wg.Go(s.during) // another connection's command, not this batch's
			wg.Wait()
			return
		}
	}
}

// TestDenyCacheGiveBackInFlight: a give-back lands while a refusal is in
// flight, on every round trip (one client sending RL.ADJUST -1 in a loop).
// On another key it must not keep the refusal out of the deny cache: a
// give-back of key a never stops key b's refusals being cached. On the
// refused key itself the refusal, decided before the give-back, is not
// kept: the next take goes to the store, which admits it.
func TestDenyCacheGiveBackInFlight(t *testing.T) {
	t.Parallel()
	p := &limit.Policy{Name: "p", Limit: 2, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	for _, tc := range []struct{ refunded, refused string }{{"a", "b"}, {"b", "b"}} {
		t.Run(fmt.Sprintf("give-back of %s, refusal of %s", tc.refunded, tc.refused), func(t *testing.T) {
			t.Parallel()
			s := &midFlightStore{seenStore: &seenStore{st: local.New(local.Config{DecidedBy: limit.ByStore})}, key: tc.refused}
			d, err := denycache.New(denycache.Config{MaxTTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			l, err := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: s, Deny: d})
			if err != nil {
				t.Fatal(err)
			}
			var receipts []string // of the refused key's takes, which empty it
			for range 2 {
				receipts = append(receipts, takeReceipt(t, l, tc.refused, 1).Receipt)
			}
			refunds := 0
			s.during = func() {
				receipt := receipts[0]
				if tc.refunded != tc.refused { // a key with tokens: take one to give it back
					receipt = takeReceipt(t, l, tc.refunded, 1).Receipt
				}
				if r := giveBack(t, l, tc.refunded, -1, receipt); r.Err != nil {
					t.Errorf("adjust %s -1: %v", tc.refunded, r.Err)
				}
				refunds++
			}
			if tc.refunded == tc.refused {
				r := take(t, l, tc.refused)[0]
				s.during = nil
				if r.Allowed || r.DecidedBy != limit.ByStore || refunds != 1 {
					t.Fatalf("take %s = %+v (%d give-backs in flight), want the store's refusal with 1", tc.refused, r, refunds)
				}
				if r := take(t, l, tc.refused)[0]; !r.Allowed || r.DecidedBy != limit.ByStore {
					t.Fatalf("take %s after a give-back that landed while its refusal was in flight = %+v, want admitted by the store", tc.refused, r)
				}
				return
			}
			got := map[string]int{}
			for range 20 {
				r := take(t, l, tc.refused)[0]
				if r.Allowed || r.Err != nil {
					t.Fatalf("take %s = %+v, want a refusal", tc.refused, r)
				}
				got[r.DecidedBy]++
			}
			t.Logf("20 refused takes of %s, %d give-backs of %s in flight: %v", tc.refused, refunds, tc.refunded, got)
			if want := map[string]int{limit.ByStore: 1, limit.ByDenyCache: 19}; got[limit.ByStore] != 1 || got[limit.ByDenyCache] != 19 {
				t.Fatalf("decided_by %v, want %v: a give-back of %s kept %s's refusals out of the deny cache", got, want, tc.refunded, tc.refused)
			}
		})
	}
}
