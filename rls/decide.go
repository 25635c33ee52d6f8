package rls

import (
	"context"
	"slices"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/envoycfg"
	"github.com/sluice-rl/sluice/limit"
)

// ShouldRateLimit decides one request of Envoy's rate-limit filter.
//
// Every descriptor is mapped to its sluice key and its policy (Matcher).
// One that no rule matches, or an unlimited one, is OK and spends nothing.
// The limited ones are taken all-or-nothing (Decider.MTake; one alone by
// Decider.Decide, as RL.TAKE, with the hot-key paths): the reply is
// OVER_LIMIT when any rule refuses, and then nothing is spent on any (a
// shadow rule excepted: it counts, and answers OK). A descriptor whose own
// hits_addend is 0 is only checked (a peek of cost 1); when one of those is
// over its limit, the others are checked too and nothing is taken.
//
// A call whose user may not take (or peek) one descriptor's key is
// PermissionDenied, and nothing is decided (auth.go). A malformed request
// is InvalidArgument; one with a descriptor that matches a concurrency
// policy is FailedPrecondition (slotRefusal); an error the store returned
// (a bug, not an outage: outages go to each rule's on_store_error) is
// Internal.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ds, err := mapRequest(req, s.bounds)
	if err != nil {
		return nil, err
	}
	ctx = limit.WithFront(ctx, "grpc")
	resp := &rlsv3.RateLimitResponse{Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(ds))}
	pl := plan{ds: ds, policies: make([]*limit.Policy, len(ds)), results: make([]limit.Result, len(ds)), ok: true}
	matches := s.match(req.GetDomain(), ds)
	if err := s.permit(ctx, ds); err != nil { // before anything is decided (auth.go)
		return nil, err
	}
	if err := slotRefusal(ds, matches); err != nil {
		return nil, err
	}
	pl.sort(matches, resp.Statuses)
	if err := s.decideQuota(ctx, &pl); err != nil {
		return nil, err
	}
	if err := s.decidePeeks(ctx, &pl); err != nil {
		return nil, err
	}
	if err := s.decideTakes(ctx, &pl); err != nil {
		return nil, err
	}
	resp.OverallCode = rlsv3.RateLimitResponse_OK
	if !pl.ok {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	for i, p := range pl.policies {
		if p != nil {
			resp.Statuses[i] = descriptorStatus(p, &pl.results[i])
		}
	}
	if s.cfg.Headers {
		resp.ResponseHeadersToAdd = rateLimitHeaders(pl.policies, pl.results)
	}
	return resp, nil
}

// slotRefusal is the error of a request with a descriptor that matches a
// concurrency policy, before anything is decided: Envoy's protocol has no
// release, so a slot taken here could never be freed, and answering OK or
// OVER_LIMIT would be a decision the policy never made. FailedPrecondition
// says the server's configuration, not the request or a bug, is what has
// to change; Envoy treats it as any error of the rate-limit service
// (failure_mode_deny, the ratelimit.error counter).
func slotRefusal(ds []descriptor, matches []matched) error {
	for i, m := range matches {
		if m.p != nil && !m.unlimited && m.p.Algorithm.IsConcurrency() {
			return status.Errorf(codes.FailedPrecondition,
				"descriptor %d (key %q) matches concurrency policy '%s', which this door cannot decide: a slot needs RL.ACQUIRE and RL.RELEASE (RESP, or HTTP /v1/acquire and /v1/release); match the descriptor with a rate policy",
				i, ds[i].key, m.p.Name)
		}
	}
	return nil
}

// plan is one request on its way through ShouldRateLimit: its descriptors
// sorted by how each is decided, and what has been decided so far.
type plan struct {
	ds       []descriptor
	policies []*limit.Policy // nil for an unmatched or unlimited descriptor
	results  []limit.Result
	// take, peek and quota index ds: the rules taken all-or-nothing, the
	// ones only checked, the quota_mode ones (-1 for one that refuses
	// everything).
	take, peek, quota []int
	ok                bool // no rule has refused the request yet
	quotaFailed       int  // quota rules that refused
}

// sort files every matched descriptor under the way it is decided; an
// unlimited or unmatched one gets its status here.
func (pl *plan) sort(matches []matched, statuses []*rlsv3.RateLimitResponse_DescriptorStatus) {
	for i, m := range matches {
		switch {
		case m.unlimited:
			statuses[i] = unlimitedStatus()
		case m.p == nil:
			statuses[i] = unmatchedStatus()
		case m.quota && m.p.Limit == 0:
			pl.policies[i], pl.quotaFailed, pl.quota = m.p, pl.quotaFailed+1, append(pl.quota, -1)
			pl.results[i] = limit.Result{RetryAfterMs: -1, DecidedBy: "config"}
		case m.quota:
			pl.policies[i], pl.quota = m.p, append(pl.quota, i)
		case m.p.Limit == 0:
			// requests_per_unit: 0 refuses everything, and no store holds
			// such a bucket: over the limit without asking one.
			pl.policies[i], pl.ok = m.p, false
			pl.results[i] = limit.Result{Limit: 0, Remaining: 0, RetryAfterMs: -1, ResetAfterMs: 0, DecidedBy: "config"}
		case pl.ds[i].peek:
			pl.policies[i], pl.peek = m.p, append(pl.peek, i)
		default:
			pl.policies[i], pl.take = m.p, append(pl.take, i)
		}
	}
}

// decideQuota decides the quota_mode rules first, each apart (spent when
// it admits): the request is over the limit for them only when every one
// of them is (envoyproxy/ratelimit's rule), and then nothing is spent on
// the other rules. A quota rule's descriptor with hits_addend 0 is peeked
// like any other: checked, and counted among the quota rules, never spent.
func (s *Server) decideQuota(ctx context.Context, pl *plan) error {
	if live := slices.DeleteFunc(slices.Clone(pl.quota), func(i int) bool { return i < 0 }); len(live) > 0 {
		reqs, out := requests(pl.ds, pl.policies, live, limit.OpTake)
		for j, i := range live {
			if pl.ds[i].peek {
				reqs[j].Op = limit.OpPeek
			}
		}
		s.col.Decide(ctx, reqs, out)
		for j, i := range live {
			if out[j].Err != nil {
				return status.Errorf(codes.Internal, "deciding: %v", out[j].Err)
			}
			pl.results[i] = out[j]
			if !out[j].Allowed {
				pl.quotaFailed++
			}
		}
	}
	if len(pl.quota) > 0 && pl.quotaFailed == len(pl.quota) {
		pl.ok = false
	}
	return nil
}

// decidePeeks checks the rules only checked. When a rule has refused (a
// blocked rule, every quota rule, a check), nothing may be spent on the
// others: the takes are checked too, and none is left to take.
func (s *Server) decidePeeks(ctx context.Context, pl *plan) error {
	if !pl.ok {
		pl.peek, pl.take = append(pl.peek, pl.take...), nil
	}
	if len(pl.peek) == 0 {
		return nil
	}
	all, err := s.peekAll(ctx, pl.ds, pl.policies, pl.peek, pl.results)
	if err != nil {
		return err
	}
	pl.ok = pl.ok && all
	if !pl.ok { // report what the takes would do
		if _, err = s.peekAll(ctx, pl.ds, pl.policies, pl.take, pl.results); err != nil {
			return err
		}
		pl.take = nil
	}
	return nil
}

// decideTakes takes the rules left, all-or-nothing.
func (s *Server) decideTakes(ctx context.Context, pl *plan) error {
	switch {
	case len(pl.take) == 1:
		// One rule is all-or-nothing by itself: it goes RL.TAKE's way,
		// hot-key paths included, which MTake does not take.
		all, err := s.decideOp(ctx, pl.ds, pl.policies, pl.take, limit.OpTake, pl.results)
		if err != nil {
			return err
		}
		pl.ok = pl.ok && all
	case len(pl.take) > 1:
		reqs, out := requests(pl.ds, pl.policies, pl.take, limit.OpTake)
		all, err := s.cfg.Decider.MTake(ctx, reqs, out)
		if err != nil {
			return status.Errorf(codes.Internal, "deciding: %v", err)
		}
		pl.ok = pl.ok && all
		for j, i := range pl.take {
			pl.results[i] = out[j]
		}
	}
	return nil
}

// matched is what one descriptor found: its policy, or unlimited.
type matched struct {
	p         *limit.Policy
	unlimited bool
	quota     bool // quota_mode: decided apart, over only when all such are
}

// match finds every descriptor's policy, and its key when the Matcher
// sees the request whole (RequestMatcher: replaces, shared counters).
func (s *Server) match(domain string, ds []descriptor) []matched {
	out := make([]matched, len(ds))
	if rm, ok := s.cfg.Matcher.(RequestMatcher); ok {
		all := make([][]envoycfg.Entry, len(ds))
		for i := range ds {
			all[i] = ds[i].entries
		}
		for i, h := range rm.LookupRequest(domain, all) {
			if h.Rule == nil || i >= len(ds) {
				continue
			}
			out[i] = matched{p: h.Rule.Policy, unlimited: h.Rule.Unlimited, quota: h.Rule.Quota}
			if h.Key != "" && h.Key != ds[i].key {
				ds[i].named, ds[i].key = ds[i].key, h.Key
			}
		}
		return out
	}
	for i := range ds {
		out[i].p, out[i].unlimited = s.cfg.Matcher.Match(domain, ds[i].entries)
	}
	return out
}

// peekAll peeks the descriptors ds[idx…] (with their own costs), fills
// their results and reports whether every one would pass.
func (s *Server) peekAll(ctx context.Context, ds []descriptor, policies []*limit.Policy, idx []int, results []limit.Result) (bool, error) {
	return s.decideOp(ctx, ds, policies, idx, limit.OpPeek, results)
}

// decideOp decides the descriptors ds[idx…] one by one with op (Decide),
// fills their results and reports whether every one passed.
func (s *Server) decideOp(ctx context.Context, ds []descriptor, policies []*limit.Policy, idx []int, op limit.Op, results []limit.Result) (bool, error) {
	if len(idx) == 0 {
		return true, nil
	}
	reqs, out := requests(ds, policies, idx, op)
	s.col.Decide(ctx, reqs, out)
	ok := true
	for j, i := range idx {
		if out[j].Err != nil {
			return false, status.Errorf(codes.Internal, "deciding: %v", out[j].Err)
		}
		results[i] = out[j]
		ok = ok && out[j].Allowed
	}
	return ok, nil
}

// requests are the limiter's requests of the descriptors ds[idx…].
func requests(ds []descriptor, policies []*limit.Policy, idx []int, op limit.Op) ([]limit.Request, []limit.Result) {
	reqs := make([]limit.Request, len(idx))
	for j, i := range idx {
		reqs[j] = limit.Request{Key: ds[i].key, Cost: ds[i].cost, Op: op, Policy: policies[i]}
	}
	return reqs, make([]limit.Result, len(idx))
}
