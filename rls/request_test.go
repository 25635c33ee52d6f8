package rls

import (
	"errors"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluice-rl/sluice/envoycfg"
)

var testBounds = bounds{descriptors: DefaultMaxDescriptors, entries: DefaultMaxEntries, keyBytes: DefaultMaxKeyBytes}

// desc builds a descriptor of key/value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func withHits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func TestMapRequest(t *testing.T) {
	req := &rlsv3.RateLimitRequest{Domain: "edge", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{
		desc("remote_address", "::1"),
		withHits(desc("path", "/a", "method", "GET"), 7),
		withHits(desc("k", ""), 0),
	}}
	got, err := mapRequest(req, testBounds)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		key  string
		cost int64
		peek bool
	}{
		{"edge:remote_address=%3A%3A1", 3, false},
		{"edge:path=/a:method=GET", 7, false},
		{"edge:k=", 1, true},
	}
	for i, w := range want {
		if got[i].key != w.key || got[i].cost != w.cost || got[i].peek != w.peek {
			t.Errorf("descriptor %d = %q cost %d peek %v, want %q cost %d peek %v", i, got[i].key, got[i].cost, got[i].peek, w.key, w.cost, w.peek)
		}
	}
	// hits_addend 0 on the request means 1, as in Envoy.
	req.HitsAddend = 0
	if got, _ := mapRequest(req, testBounds); got[0].cost != 1 {
		t.Errorf("request hits_addend 0: cost %d, want 1", got[0].cost)
	}
}

func TestMapRequestRefuses(t *testing.T) {
	many := make([]*ratelimitv3.RateLimitDescriptor, DefaultMaxDescriptors+1)
	for i := range many {
		many[i] = desc("k", "v")
	}
	long := strings.Repeat("x", DefaultMaxKeyBytes)
	tests := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string
	}{
		{"no domain", &rlsv3.RateLimitRequest{Descriptors: many[:1]}, "rate limit domain must not be empty"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "d"}, "rate limit descriptor list must not be empty"},
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: many}, "65 descriptors, more than the 64 allowed"},
		{"no entries", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{{}}}, "descriptor 0 has no entries"},
		{"nil descriptor", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{nil}}, "descriptor 0 has no entries"},
		{"empty key", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("a", "1", "", "v")}}, "descriptor 0, entry 1: key must not be empty"},
		{"too many entries", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(strings.Split(strings.Repeat("k,v,", 17), ",")...)}}, "descriptor 0 has 17 entries, more than the 16 allowed"},
		{"huge value", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", long)}}, "descriptor 0: its key is longer than the 1024 bytes allowed"},
		{"escaping past the bound", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("k", strings.Repeat(":", 400))}}, "descriptor 0: its key is 1204 bytes, more than the 1024 allowed"},
		{"huge domain", &rlsv3.RateLimitRequest{Domain: long + "x", Descriptors: many[:1]}, "domain is 1025 bytes, more than the 1024 allowed"},
		{"huge hits", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{withHits(desc("k", "v"), 1<<60)}}, "descriptor 0: hits_addend 1152921504606846976 is more than 9007199254740992"},
		{"negative hits", &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: desc("k", "v").Entries, IsNegativeHits: true}}}, "descriptor 0: is_negative_hits is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := mapRequest(tt.req, testBounds)
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), tt.msg) {
				t.Errorf("got %v, want InvalidArgument %q", err, tt.msg)
			}
		})
	}
}

// Any bytes, decoded as a request, either map to keys within the bounds,
// each the envoycfg.Key of its descriptor, or are refused with
// InvalidArgument; never a panic.
func FuzzMapRequest(f *testing.F) {
	for _, req := range []*rlsv3.RateLimitRequest{
		{Domain: "edge", HitsAddend: 2, Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("remote_address", "10.0.0.1"), withHits(desc("a", ":=%", "b", ""), 0)}},
		{Domain: "a:b", Descriptors: []*ratelimitv3.RateLimitDescriptor{withHits(desc("k", "v"), 1<<62)}},
		{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{{}}},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	small := bounds{descriptors: 4, entries: 3, keyBytes: 64}
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &rlsv3.RateLimitRequest{}
		if proto.Unmarshal(data, req) != nil {
			return
		}
		ds, err := mapRequest(req, small)
		if err != nil {
			if st, ok := status.FromError(err); !ok || st.Code() != codes.InvalidArgument {
				t.Fatalf("error %v, want InvalidArgument", err)
			}
			return
		}
		if len(ds) != len(req.Descriptors) || len(ds) > small.descriptors {
			t.Fatalf("%d descriptors mapped of %d", len(ds), len(req.Descriptors))
		}
		for i, d := range ds {
			var es []envoycfg.Entry
			for _, e := range req.Descriptors[i].Entries {
				es = append(es, envoycfg.Entry{Key: e.Key, Value: e.Value})
			}
			switch {
			case d.key != envoycfg.Key(req.Domain, es):
				t.Fatalf("descriptor %d: key %q, want %q", i, d.key, envoycfg.Key(req.Domain, es))
			case len(d.key) > small.keyBytes || len(es) > small.entries:
				t.Fatalf("descriptor %d: key of %d bytes, %d entries, past the bounds", i, len(d.key), len(es))
			case d.cost < 1 || d.cost > MaxCost:
				t.Fatalf("descriptor %d: cost %d", i, d.cost)
			}
		}
	})
}

func TestInvalidIsAStatus(t *testing.T) {
	var st interface{ GRPCStatus() *status.Status }
	if !errors.As(invalid("x"), &st) {
		t.Fatal("invalid() is no gRPC status")
	}
}
