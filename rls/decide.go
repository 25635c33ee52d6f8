package rls

import (
	"context"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
	// TODO(front): ctx = limit.WithFront(ctx, "grpc") once it exists, for the metrics' front label.
	resp := &rlsv3.RateLimitResponse{Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(ds))}
	policies := make([]*limit.Policy, len(ds))
	var take, peek []int
	for i := range ds {
		p, unlimited := s.cfg.Matcher.Match(req.GetDomain(), ds[i].entries)
		switch {
		case unlimited:
			resp.Statuses[i] = unlimitedStatus()
		case p == nil:
			resp.Statuses[i] = unmatchedStatus()
		case ds[i].peek:
			policies[i], peek = p, append(peek, i)
		default:
			policies[i], take = p, append(take, i)
		}
	}

	results := make([]limit.Result, len(ds))
	ok := true
	if len(peek) > 0 {
		if ok, err = s.peekAll(ctx, ds, policies, peek, results); err != nil {
			return nil, err
		}
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
