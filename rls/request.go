package rls

import (
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/envoycfg"
	"github.com/sluice-rl/sluice/limit"
)

// MaxCost bounds a hits_addend: no policy's limit reaches it (limits stay
// below limit.MaxScaled), so a larger cost could never be admitted anyway.
const MaxCost = limit.MaxScaled

// bounds are the limits of one request (see Config).
type bounds struct {
	descriptors, entries, keyBytes int
}

// descriptor is one descriptor of a request, mapped: its entries, its
// sluice key and what it costs.
type descriptor struct {
	entries []envoycfg.Entry
	key     string
	// named is the key the descriptor itself names when the matcher
	// counts it on another (key: a share_threshold rule's); "" otherwise.
	// A user must be allowed both.
	named string
	cost  int64
	// peek is set when the descriptor's own hits_addend is 0, which
	// envoyproxy/ratelimit reads as "check, do not count": the rule is
	// peeked with a cost of 1, spending nothing.
	peek bool
}

// invalid is the gRPC error of a malformed request.
func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// mapRequest validates req and maps each descriptor to its key and cost.
// It allocates in proportion to the request, which gRPC has already
// bounded by its maximum message size.
func mapRequest(req *rlsv3.RateLimitRequest, b bounds) ([]descriptor, error) {
	domain := req.GetDomain()
	ds := req.GetDescriptors()
	switch {
	case domain == "":
		return nil, invalid("rate limit domain must not be empty")
	case len(ds) == 0:
		return nil, invalid("rate limit descriptor list must not be empty")
	case len(ds) > b.descriptors:
		return nil, invalid("%d descriptors, more than the %d allowed", len(ds), b.descriptors)
	case len(domain) > b.keyBytes:
		return nil, invalid("domain is %d bytes, more than the %d allowed", len(domain), b.keyBytes)
	}
	// Envoy leaves hits_addend 0 when unset; 0 and 1 both mean one hit.
	reqCost := max(1, int64(req.GetHitsAddend()))
	out := make([]descriptor, len(ds))
	for i, d := range ds {
		m, err := mapDescriptor(domain, i, d, reqCost, b)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

func mapDescriptor(domain string, i int, d *ratelimitv3.RateLimitDescriptor, reqCost int64, b bounds) (descriptor, error) {
	es := d.GetEntries()
	switch {
	case len(es) == 0:
		return descriptor{}, invalid("descriptor %d has no entries", i)
	case len(es) > b.entries:
		return descriptor{}, invalid("descriptor %d has %d entries, more than the %d allowed", i, len(es), b.entries)
	case d.GetIsNegativeHits():
		return descriptor{}, invalid("descriptor %d: is_negative_hits is not supported (sluice never gives tokens back on request)", i)
	}
	m := descriptor{entries: make([]envoycfg.Entry, len(es)), cost: reqCost}
	size := len(domain)
	for j, e := range es {
		k, v := e.GetKey(), e.GetValue()
		if k == "" {
			return descriptor{}, invalid("descriptor %d, entry %d: key must not be empty", i, j)
		}
		// Checked before the key is built, so a huge entry costs nothing.
		if size += 2 + len(k) + len(v); size > b.keyBytes {
			return descriptor{}, invalid("descriptor %d: its key is longer than the %d bytes allowed", i, b.keyBytes)
		}
		m.entries[j] = envoycfg.Entry{Key: k, Value: v}
	}
	m.key = envoycfg.Key(domain, m.entries)
	if len(m.key) > b.keyBytes { // escaping made it longer
		return descriptor{}, invalid("descriptor %d: its key is %d bytes, more than the %d allowed", i, len(m.key), b.keyBytes)
	}
	if h := d.GetHitsAddend(); h != nil {
		switch v := h.GetValue(); {
		case v == 0:
			m.cost, m.peek = 1, true
		case v > MaxCost:
			return descriptor{}, invalid("descriptor %d: hits_addend %d is more than %d", i, v, uint64(MaxCost))
		default:
			m.cost = int64(v)
		}
	}
	return m, nil
}
