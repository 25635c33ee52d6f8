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
// A malformed request is InvalidArgument; an error the store returned (a
// bug, not an outage: outages go to each rule's on_store_error) is
// Internal.
func (s *Server) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ds, err := mapRequest(req, s.bounds)
	if err != nil {
		return nil, err
	}
	ctx = limit.WithFront(ctx, "grpc")
	resp := &rlsv3.RateLimitResponse{Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(ds))}
	policies := make([]*limit.Policy, len(ds))
	results := make([]limit.Result, len(ds))
	var take, peek, quota []int
	ok := true
	quotaFailed := 0
	matches := s.match(req.GetDomain(), ds)
	for i, m := range matches {
		switch {
		case m.unlimited:
			resp.Statuses[i] = unlimitedStatus()
		case m.p == nil:
			resp.Statuses[i] = unmatchedStatus()
		case m.quota && m.p.Limit == 0:
			policies[i], quotaFailed, quota = m.p, quotaFailed+1, append(quota, -1)
			results[i] = limit.Result{RetryAfterMs: -1, DecidedBy: "config"}
		case m.quota:
			policies[i], quota = m.p, append(quota, i)
		case m.p.Limit == 0:
			// requests_per_unit: 0 refuses everything, and no store holds
			// such a bucket: over the limit without asking one.
			policies[i], ok = m.p, false
			results[i] = limit.Result{Limit: 0, Remaining: 0, RetryAfterMs: -1, ResetAfterMs: 0, DecidedBy: "config"}
		case ds[i].peek:
			policies[i], peek = m.p, append(peek, i)
		default:
			policies[i], take = m.p, append(take, i)
		}
	}

	// quota_mode rules first, each decided apart (spent when it admits):
	// the request is over the limit for them only when every one of them
	// is (envoyproxy/ratelimit's rule), and then nothing is spent on the
	// other rules. A quota rule's descriptor with hits_addend 0 is peeked
	// like any other: checked, and counted among the quota rules, never
	// spent.
	if live := slices.DeleteFunc(slices.Clone(quota), func(i int) bool { return i < 0 }); len(live) > 0 {
		reqs, out := requests(ds, policies, live, limit.OpTake)
		for j, i := range live {
			if ds[i].peek {
				reqs[j].Op = limit.OpPeek
			}
		}
		s.cfg.Decider.Decide(ctx, reqs, out)
		for j, i := range live {
			if out[j].Err != nil {
				return nil, status.Errorf(codes.Internal, "deciding: %v", out[j].Err)
			}
			results[i] = out[j]
			if !out[j].Allowed {
				quotaFailed++
			}
		}
	}
	if len(quota) > 0 && quotaFailed == len(quota) {
		ok = false
	}

	if !ok { // a blocked rule, or every quota rule refused: nothing may be spent on the others
		peek, take = append(peek, take...), nil
	}
	if len(peek) > 0 {
		all, err := s.peekAll(ctx, ds, policies, peek, results)
		if err != nil {
			return nil, err
		}
		ok = ok && all
		if !ok { // nothing may be spent: report what the takes would do
			if _, err = s.peekAll(ctx, ds, policies, take, results); err != nil {
				return nil, err
			}
			take = nil
		}
	}
	switch {
	case len(take) == 1:
		// One rule is all-or-nothing by itself: it goes RL.TAKE's way,
		// hot-key paths included, which MTake does not take.
		var all bool
		if all, err = s.decideOp(ctx, ds, policies, take, limit.OpTake, results); err != nil {
			return nil, err
		}
		ok = ok && all
	case len(take) > 1:
		reqs, out := requests(ds, policies, take, limit.OpTake)
		all, err := s.cfg.Decider.MTake(ctx, reqs, out)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "deciding: %v", err)
		}
		ok = ok && all
		for j, i := range take {
			results[i] = out[j]
		}
	}

	resp.OverallCode = rlsv3.RateLimitResponse_OK
	if !ok {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	for i, p := range policies {
		if p != nil {
			resp.Statuses[i] = descriptorStatus(p, &results[i])
		}
	}
	if s.cfg.Headers {
		resp.ResponseHeadersToAdd = rateLimitHeaders(policies, results)
	}
	return resp, nil
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
			if h.Key != "" {
				ds[i].key = h.Key
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
	s.cfg.Decider.Decide(ctx, reqs, out)
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
