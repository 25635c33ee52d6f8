package limiter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/local"
)

// downStore is a store whose node never answers: the one fault that a unit
// test cannot make happen for real (the cluster tests do it with SIGSTOP).
type downStore struct{ err error }

func (d downStore) Do(_ context.Context, reqs []limit.Request, out []limit.Result) {
	for i := range reqs {
		out[i] = limit.Result{Err: d.err}
	}
}
func (d downStore) Reset(context.Context, string, *limit.Policy) (bool, error) { return false, d.err }
func (downStore) Close() error                                                 { return nil }

func policyFor(mode limit.FailMode, share float64) MatcherFunc {
	p := &limit.Policy{Name: "p", Limit: 10, Rate: 1, Period: time.Hour, OnStoreError: mode, LocalShare: share}
	return func(key string) *limit.Policy {
		if key == "nomatch" {
			return nil
		}
		return p
	}
}

func take(t *testing.T, l *Limiter, keys ...string) []limit.Result {
	t.Helper()
	reqs := make([]limit.Request, len(keys))
	for i, k := range keys {
		reqs[i] = limit.Request{Key: k, Cost: 1}
	}
	out := make([]limit.Result, len(keys))
	l.Decide(context.Background(), reqs, out)
	return out
}

func TestFailurePolicies(t *testing.T) {
	t.Parallel()
	unavailable := &limit.UnavailableError{Node: "n1", Err: context.DeadlineExceeded}
	tests := []struct {
		mode      limit.FailMode
		share     float64
		wantAdmit int // of 20 takes on one key
		wantBy    string
	}{
		{limit.FailOpen, 1, 20, limit.ByFallbackOpen},
		{limit.FailClosed, 1, 0, limit.ByFallbackClosed},
		{limit.FailLocal, 1, 10, limit.ByFallbackLocal},
		{limit.FailLocal, 0.5, 5, limit.ByFallbackLocal},
		{"", 1, 0, limit.ByFallbackClosed}, // unset never admits by accident
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			t.Parallel()
			l, err := New(Config{Policies: policyFor(tt.mode, tt.share), Store: downStore{unavailable}})
			if err != nil {
				t.Fatal(err)
			}
			admitted := 0
			for range 20 {
				r := take(t, l, "k")[0]
				if r.Err != nil {
					t.Fatalf("error reply %v: a connectivity failure must go to the policy", r.Err)
				}
				if r.DecidedBy != tt.wantBy {
					t.Fatalf("decided_by %q, want %q", r.DecidedBy, tt.wantBy)
				}
				if !r.Allowed && r.RetryAfterMs < 1 {
					t.Fatalf("reject with retry_after %d", r.RetryAfterMs)
				}
				if r.Allowed {
					admitted++
				}
			}
			if admitted != tt.wantAdmit {
				t.Fatalf("admitted %d of 20, want %d", admitted, tt.wantAdmit)
			}
			if s := l.Snapshot(); s.StoreErrors != 20 || s.ByPath[tt.wantBy] != 20 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

// An error that Redis answered is a bug to surface, never an admit.
func TestRedisErrorsAreNotFailures(t *testing.T) {
	t.Parallel()
	l, _ := New(Config{Policies: policyFor(limit.FailOpen, 1), Store: downStore{errors.New("WRONGTYPE Operation against a key holding the wrong kind of value")}})
	r := take(t, l, "k")[0]
	if r.Err == nil || r.Allowed {
		t.Fatalf("got %+v, want the error", r)
	}
}

func TestNoPolicyInBatch(t *testing.T) {
	t.Parallel()
	l, _ := New(Config{Policies: policyFor(limit.FailClosed, 1), Store: local.New(local.Config{})})
	out := take(t, l, "a", "nomatch", "b")
	if !errors.Is(out[1].Err, limit.ErrNoPolicy) || out[1].Err.Error() != "no policy matches key 'nomatch'" {
		t.Fatalf("got %v", out[1].Err)
	}
	for _, i := range []int{0, 2} {
		if out[i].Err != nil || !out[i].Allowed || out[i].DecidedBy != limit.ByEmbedded || out[i].Remaining != 9 {
			t.Fatalf("item %d: %+v", i, out[i])
		}
	}
}

func TestShadowAlwaysAdmits(t *testing.T) {
	t.Parallel()
	p := &limit.Policy{Limit: 1, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed, Shadow: true}
	l, _ := New(Config{Policies: MatcherFunc(func(string) *limit.Policy { return p }), Store: local.New(local.Config{})})
	for i := range 3 {
		r := take(t, l, "k")[0]
		if !r.Allowed || r.DecidedBy != limit.ByShadow {
			t.Fatalf("take %d: %+v", i, r)
		}
	}
	if s := l.Snapshot(); s.ByPath[limit.ByShadow] != 3 {
		t.Fatalf("shadow count %d", s.ByPath[limit.ByShadow])
	}
}

func TestResetClearsFallbackToo(t *testing.T) {
	t.Parallel()
	l, _ := New(Config{Policies: policyFor(limit.FailLocal, 1), Store: downStore{&limit.UnavailableError{Err: context.DeadlineExceeded}}})
	for range 10 {
		take(t, l, "k")
	}
	if r := take(t, l, "k")[0]; r.Allowed {
		t.Fatal("local share not exhausted")
	}
	_, _ = l.Reset(context.Background(), "k")
	if r := take(t, l, "k")[0]; !r.Allowed {
		t.Fatal("fallback bucket survived RL.RESET")
	}
}

// A store overloaded (answering, but not in time for the request) decides
// by the policy's overload mode: open becomes local unless on_overload
// says open in as many words, so a surge never switches limiting off.
func TestOverloadPolicies(t *testing.T) {
	t.Parallel()
	overloaded := &limit.OverloadError{Node: "n1", Wait: 80 * time.Millisecond, Left: 40 * time.Millisecond}
	tests := []struct {
		name          string
		onStoreError  limit.FailMode
		onOverload    limit.FailMode
		wantAdmit     int // of 20 takes on one key, limit 10, share 0.5
		wantBy        string
		wantByOnFault string // the same policy when the store is unavailable
	}{
		{"open", limit.FailOpen, "", 5, limit.ByOverloadLocal, limit.ByFallbackOpen},
		{"open, on_overload open", limit.FailOpen, limit.FailOpen, 20, limit.ByOverloadOpen, limit.ByFallbackOpen},
		{"closed", limit.FailClosed, "", 0, limit.ByOverloadClosed, limit.ByFallbackClosed},
		{"local", limit.FailLocal, "", 5, limit.ByOverloadLocal, limit.ByFallbackLocal},
		{"local, on_overload closed", limit.FailLocal, limit.FailClosed, 0, limit.ByOverloadClosed, limit.ByFallbackLocal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := &limit.Policy{Name: "p", Limit: 10, Rate: 1, Period: time.Hour, OnStoreError: tt.onStoreError, OnOverload: tt.onOverload, LocalShare: 0.5}
			match := MatcherFunc(func(string) *limit.Policy { return p })
			l, err := New(Config{Policies: match, Store: downStore{overloaded}})
			if err != nil {
				t.Fatal(err)
			}
			admitted := 0
			for range 20 {
				r := take(t, l, "k")[0]
				if r.Err != nil || r.DecidedBy != tt.wantBy {
					t.Fatalf("overloaded: err %v, decided_by %q; want no error, %q", r.Err, r.DecidedBy, tt.wantBy)
				}
				if r.Allowed {
					admitted++
				}
			}
			if admitted != tt.wantAdmit {
				t.Errorf("overloaded: admitted %d of 20, want %d", admitted, tt.wantAdmit)
			}
			if s := l.Snapshot(); s.ByPath[tt.wantBy] != 20 {
				t.Errorf("decided_by_%s = %d, want 20", tt.wantBy, s.ByPath[tt.wantBy])
			}
			l, err = New(Config{Policies: match, Store: downStore{&limit.UnavailableError{Node: "n1", Err: context.DeadlineExceeded}}})
			if err != nil {
				t.Fatal(err)
			}
			if r := take(t, l, "k")[0]; r.DecidedBy != tt.wantByOnFault {
				t.Errorf("unavailable: decided_by %q, want %q (on_overload must not change a fault's answer)", r.DecidedBy, tt.wantByOnFault)
			}
		})
	}
}
