package main

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"

	"github.com/sluice-rl/sluice/cluster"
	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
	"github.com/sluice-rl/sluice/internal/tracing"
)

// gotSpan is one span an OTLP receiver was sent, flattened.
type gotSpan struct {
	trace, id, parent string // hex; parent "" for a root
	name              string
	attrs             map[string]any
	resource          map[string]any
	events            int
}

// otlpReceiver is an OTLP/HTTP trace receiver on loopback: it decodes
// every POST /v1/traces (protobuf ExportTraceServiceRequest) and keeps
// its spans.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []gotSpan
	bad   []string // requests it could not decode
}

func newReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	var msg collectortrace.ExportTraceServiceRequest
	if err == nil && (req.Method != http.MethodPost || req.URL.Path != "/v1/traces") {
		err = fmt.Errorf("%s %s", req.Method, req.URL.Path)
	}
	if err == nil {
		err = proto.Unmarshal(b, &msg)
	}
	if err != nil {
		r.mu.Lock()
		r.bad = append(r.bad, err.Error())
		r.mu.Unlock()
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []gotSpan
	for _, rs := range msg.ResourceSpans {
		res := attrMap(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				got = append(got, gotSpan{trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId),
					parent: hex.EncodeToString(s.ParentSpanId), name: s.Name, attrs: attrMap(s.Attributes), resource: res, events: len(s.Events)})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func attrMap(kvs []*commonpb.KeyValue) map[string]any {
	m := map[string]any{}
	for _, kv := range kvs {
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = v.IntValue
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = v.BoolValue
		default:
			m[kv.Key] = kv.Value.String()
		}
	}
	return m
}

func (r *otlpReceiver) snapshot() []gotSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bad) > 0 {
		panic(fmt.Sprintf("the receiver could not decode: %v", r.bad))
	}
	return append([]gotSpan(nil), r.spans...)
}

// waitFor polls the receiver until every span named by want is there:
// each func picks its span from what has arrived, or reports it missing.
func (r *otlpReceiver) waitFor(t *testing.T, what string, ready func([]gotSpan) bool) []gotSpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans := r.snapshot()
		if ready(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not among the %d spans received within 30s:\n%s", what, len(spans), dumpSpans(spans))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dumpSpans(spans []gotSpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s trace=%s id=%s parent=%s %v\n", s.name, s.trace, s.id, s.parent, s.attrs)
	}
	return b.String()
}

// find returns the spans that match name and every attribute of attrs.
func find(spans []gotSpan, name string, attrs map[string]any) []gotSpan {
	var out []gotSpan
	for _, s := range spans {
		if s.name != name {
			continue
		}
		ok := true
		for k, v := range attrs {
			if s.attrs[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	return out
}

func childrenOf(spans []gotSpan, parent gotSpan, name string) []gotSpan {
	var out []gotSpan
	for _, s := range spans {
		if s.parent == parent.id && s.trace == parent.trace && s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// traceparent is a W3C traceparent header of a fresh trace id and parent
// span id, sampled or not.
func traceparent(t *testing.T, n byte, sampled bool) (header, traceID, spanID string) {
	t.Helper()
	traceID = fmt.Sprintf("%032x", []byte{0x5e, 0x11, 0xce, n, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, n})
	spanID = fmt.Sprintf("%016x", []byte{0xab, 0xcd, n, 4, 5, 6, 7, n})
	flags := "01"
	if !sampled {
		flags = "00"
	}
	return "00-" + traceID + "-" + spanID + "-" + flags, traceID, spanID
}

const tracingConfig = `defaults: {on_store_error: closed}
policies:
  - {name: via-resp, match: "resp:*", limit: 100, rate: 100, period: 1h}
  - {name: via-http, match: "http:*", limit: 5, rate: 5, period: 1h}
  - {name: via-grpc, match: "edge:path=*", limit: 7, rate: 7, period: 1h}
  - {name: off, match: "off:*", limit: 9, rate: 9, period: 1h}
`

// startTraced starts sluice with --http and --grpc and, when endpoint is
// not "", tracing to it; the batch processor exports every 50ms
// (OTEL_BSP_SCHEDULE_DELAY, read by the OTel SDK), so spans arrive while
// the test polls.
func startTraced(t *testing.T, endpoint string, args ...string) (p *proc, httpBase, grpcTarget string) {
	t.Helper()
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	if endpoint != "" {
		args = append(args, "--otlp-endpoint", endpoint)
	}
	p, h := startWithHTTP(t, append([]string{"--grpc", "127.0.0.1:0", "--config", writeConfig(t, tracingConfig)}, args...)...)
	return p, "http://" + h, grpcAddr(t, p)
}

// pipelineTakes sends the RL.TAKEs of keys in one pipeline: one write,
// one read by the server, one Decide.
func pipelineTakes(t *testing.T, c *redis.Client, keys []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Do(ctx, "RL.TAKE", k)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, cmd := range cmds {
		if v, err := cmd.(*redis.Cmd).Slice(); err != nil || v[0] != int64(1) {
			t.Fatalf("take %s: %v %v, want allowed", keys[i], v, err)
		}
	}
}

// TestTracingDoors: with --otlp-endpoint, the real binary (embedded store)
// sends its spans to an OTLP/HTTP receiver: the HTTP and gRPC doors'
// server spans continue the caller's W3C traceparent (same trace id, the
// caller's span as parent), with a sluice.decide child naming the policy,
// decided_by and batch size; a RESP pipeline of 10 RL.TAKEs is one root
// decide span of batch size 10; a traceparent that is not sampled gives
// no span at all.
func TestTracingDoors(t *testing.T) {
	rcv := newReceiver(t)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=ci")
	p, base, gaddr := startTraced(t, rcv.srv.URL)
	hc := &http.Client{Timeout: 5 * time.Second}

	unsampled, unsampledTrace, _ := traceparent(t, 1, false)
	if a := call(t, hc, "POST", base+"/v1/take", `{"key":"http:quiet"}`, "traceparent", unsampled); a.status != 200 {
		t.Fatalf("unsampled take: %d %v", a.status, a.body)
	}

	httpTP, httpTrace, httpParent := traceparent(t, 2, true)
	if a := call(t, hc, "POST", base+"/v1/take", `{"key":"http:a","cost":2}`, "traceparent", httpTP); a.status != 200 {
		t.Fatalf("take: %d %v", a.status, a.body)
	}

	// A malformed traceparent is no error: the request is served, under a root span.
	if a := call(t, hc, "GET", base+"/v1/check?key=http:bad", "", "traceparent", "00-not-a-trace-01"); a.status != 200 {
		t.Fatalf("check with a malformed traceparent: %d %v", a.status, a.body)
	}

	grpcTP, grpcTrace, grpcParent := traceparent(t, 3, true)
	door := rlsClient(t, gaddr, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	gctx := metadata.AppendToOutgoingContext(ctx, "traceparent", grpcTP)
	if resp, err := door.ShouldRateLimit(gctx, rlsRequest("edge", 1, []string{"path", "/x"})); err != nil || rlsCodes(resp) != "OK OK/6" {
		t.Fatalf("ShouldRateLimit: %v %v", resp, err)
	}

	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("resp:%d", i)
	}
	pipelineTakes(t, p.client(t), keys)

	spans := rcv.waitFor(t, "the HTTP, gRPC and RESP spans", func(s []gotSpan) bool {
		return len(find(s, "POST /v1/take", nil)) > 0 && len(find(s, tracing.SpanGRPC, nil)) > 0 && len(find(s, "GET /v1/check", nil)) > 0 &&
			len(find(s, tracing.SpanDecide, map[string]any{"sluice.door": "resp"})) > 0 && len(find(s, tracing.SpanDecide, map[string]any{"sluice.door": "grpc"})) > 0 &&
			len(find(s, tracing.SpanDecide, map[string]any{"sluice.door": "http"})) > 0
	})

	hs := find(spans, "POST /v1/take", nil)
	if len(hs) != 1 {
		t.Fatalf("%d HTTP spans, want 1 (the unsampled request has none):\n%s", len(hs), dumpSpans(spans))
	}
	h := hs[0]
	if h.trace != httpTrace || h.parent != httpParent {
		t.Errorf("HTTP span: trace %s parent %s, want the traceparent's %s and %s", h.trace, h.parent, httpTrace, httpParent)
	}
	for k, want := range map[string]any{"http.request.method": "POST", "http.route": "/v1/take", "http.response.status_code": int64(200)} {
		if got := h.attrs[k]; got != want {
			t.Errorf("HTTP span %s = %v, want %v", k, got, want)
		}
	}
	for k, want := range map[string]any{"service.name": "sluice", "deployment.environment.name": "ci", "telemetry.sdk.language": "go"} {
		if got := h.resource[k]; got != want {
			t.Errorf("resource %s = %v, want %v", k, got, want)
		}
	}
	checkDecide(t, spans, h, map[string]any{"sluice.door": "http", "sluice.policy": "via-http", "sluice.decided_by": "embedded",
		"sluice.batch.size": int64(1), "sluice.allowed": int64(1), "sluice.rejected": int64(0)})

	if bad := find(spans, "GET /v1/check", nil); len(bad) != 1 || bad[0].parent != "" {
		t.Errorf("the request with a malformed traceparent: spans %v, want one root", bad)
	} else {
		checkDecide(t, spans, bad[0], map[string]any{"sluice.door": "http", "sluice.policy": "via-http", "sluice.batch.size": int64(1)})
	}

	gs := find(spans, tracing.SpanGRPC, nil)
	if len(gs) != 1 {
		t.Fatalf("%d gRPC spans, want 1:\n%s", len(gs), dumpSpans(spans))
	}
	g := gs[0]
	if g.trace != grpcTrace || g.parent != grpcParent {
		t.Errorf("gRPC span: trace %s parent %s, want the traceparent's %s and %s", g.trace, g.parent, grpcTrace, grpcParent)
	}
	for k, want := range map[string]any{"rpc.system": "grpc", "rpc.service": "envoy.service.ratelimit.v3.RateLimitService", "rpc.method": "ShouldRateLimit", "rpc.grpc.status_code": int64(0)} {
		if got := g.attrs[k]; got != want {
			t.Errorf("gRPC span %s = %v, want %v", k, got, want)
		}
	}
	checkDecide(t, spans, g, map[string]any{"sluice.door": "grpc", "sluice.policy": "via-grpc", "sluice.decided_by": "embedded", "sluice.batch.size": int64(1)})

	rs := find(spans, tracing.SpanDecide, map[string]any{"sluice.door": "resp"})
	if len(rs) != 1 {
		t.Fatalf("%d RESP decide spans for one pipeline of %d, want 1:\n%s", len(rs), len(keys), dumpSpans(spans))
	}
	r := rs[0]
	want := map[string]any{"sluice.batch.size": int64(len(keys)), "sluice.policy": "via-resp", "sluice.decided_by": "embedded", "sluice.allowed": int64(len(keys))}
	for k, v := range want {
		if r.attrs[k] != v {
			t.Errorf("RESP decide span %s = %v, want %v", k, r.attrs[k], v)
		}
	}
	if r.parent != "" {
		t.Errorf("RESP decide span has parent %s, want a root: RESP carries no trace context", r.parent)
	}
	if r.events != len(keys) {
		t.Errorf("RESP decide span: %d decision events, want %d", r.events, len(keys))
	}
	for _, s := range spans {
		if s.trace == unsampledTrace {
			t.Errorf("a span of the unsampled traceparent was exported: %s %v", s.name, s.attrs)
		}
	}
}

// checkDecide checks that door has exactly one sluice.decide child, with
// attrs.
func checkDecide(t *testing.T, spans []gotSpan, door gotSpan, attrs map[string]any) {
	t.Helper()
	ds := childrenOf(spans, door, tracing.SpanDecide)
	if len(ds) != 1 {
		t.Fatalf("%s: %d sluice.decide children, want 1:\n%s", door.name, len(ds), dumpSpans(spans))
	}
	for k, want := range attrs {
		if got := ds[0].attrs[k]; got != want {
			t.Errorf("%s's decide span: %s = %v (%T), want %v", door.name, k, got, got, want)
		}
	}
}

// TestTracingOffSendsNothing: without --otlp-endpoint (the default) the
// binary sends no span, whatever its doors are asked: an instance with
// tracing off serves RESP, HTTP (with a sampled traceparent) and gRPC,
// then a second instance with tracing on serves one request against the
// same receiver; once that request's span has arrived, no span of the
// first instance's policy or trace is there.
func TestTracingOffSendsNothing(t *testing.T) {
	rcv := newReceiver(t)
	off, offBase, offGRPC := startTraced(t, "")
	hc := &http.Client{Timeout: 5 * time.Second}
	offTP, offTrace, _ := traceparent(t, 4, true)
	if a := call(t, hc, "POST", offBase+"/v1/take", `{"key":"off:h"}`, "traceparent", offTP); a.status != 200 {
		t.Fatalf("take: %d %v", a.status, a.body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rlsClient(t, offGRPC, nil).ShouldRateLimit(metadata.AppendToOutgoingContext(ctx, "traceparent", offTP),
		rlsRequest("off", 1, []string{"k", "v"})); err != nil {
		t.Fatal(err)
	}
	pipelineTakes(t, off.client(t), []string{"off:1", "off:2", "off:3"})
	off.Stop() // a process with tracing off has nothing to flush

	_, onBase, _ := startTraced(t, rcv.srv.URL)
	onTP, onTrace, _ := traceparent(t, 5, true)
	if a := call(t, hc, "POST", onBase+"/v1/take", `{"key":"http:on"}`, "traceparent", onTP); a.status != 200 {
		t.Fatalf("take: %d %v", a.status, a.body)
	}
	spans := rcv.waitFor(t, "the traced instance's spans", func(s []gotSpan) bool {
		for _, x := range s {
			if x.trace == onTrace && x.name == tracing.SpanDecide {
				return true
			}
		}
		return false
	})
	for _, s := range spans {
		if s.trace == offTrace || s.attrs["sluice.policy"] == "off" {
			t.Errorf("the instance with tracing off sent a span: %s %v", s.name, s.attrs)
		}
	}
	t.Logf("%d spans received, all from the traced instance", len(spans))
}

// TestTracingStoreSpans: against a real Redis Cluster, each decide span
// has one sluice.store child per node its batch went to, naming the node
// (server.address, server.port), with batch sizes that add up to the
// batch and match the nodes that own the keys; a traced HTTP request's
// store span is in the caller's trace.
func TestTracingStoreSpans(t *testing.T) {
	c := redistest.NewCluster(t, localredis.Config{Replicas: -1})
	rcv := newReceiver(t)
	p, base, _ := startTraced(t, rcv.srv.URL, "--cluster", strings.Join(c.Addrs(), ","), "--timeout", "2s")

	keys := make([]string, 12)
	for i := range keys {
		keys[i] = fmt.Sprintf("resp:n%d", i)
	}
	pipelineTakes(t, p.client(t), keys)
	httpTP, httpTrace, _ := traceparent(t, 6, true)
	hc := &http.Client{Timeout: 5 * time.Second}
	if a := call(t, hc, "POST", base+"/v1/take", `{"key":"http:store"}`, "traceparent", httpTP); a.status != 200 {
		t.Fatalf("take: %d %v", a.status, a.body)
	}

	// Which primary owns each key, asked of the cluster itself.
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	owner := func(key string) string {
		t.Helper()
		n, err := cc.MasterForKey(ctx, cluster.Key(key))
		if err != nil {
			t.Fatal(err)
		}
		return n.Options().Addr
	}
	want := map[string]int64{}
	for _, k := range keys {
		want[owner(k)]++
	}

	spans := rcv.waitFor(t, "the RESP decide span and its store spans", func(s []gotSpan) bool {
		ds := find(s, tracing.SpanDecide, map[string]any{"sluice.door": "resp", "sluice.batch.size": int64(len(keys))})
		if len(ds) != 1 {
			return false
		}
		n := int64(0)
		for _, st := range childrenOf(s, ds[0], tracing.SpanStore) {
			n += st.attrs["sluice.batch.size"].(int64)
		}
		return n == int64(len(keys)) && len(find(s, tracing.SpanDecide, map[string]any{"sluice.door": "http"})) > 0
	})
	d := find(spans, tracing.SpanDecide, map[string]any{"sluice.door": "resp"})[0]
	if got := d.attrs["sluice.decided_by"]; got != "store" {
		t.Errorf("decide span decided_by %v, want store", got)
	}
	got := map[string]int64{}
	for _, st := range childrenOf(spans, d, tracing.SpanStore) {
		addr := fmt.Sprintf("%v:%v", st.attrs["server.address"], st.attrs["server.port"])
		got[addr] += st.attrs["sluice.batch.size"].(int64)
		if st.attrs["db.system.name"] != "redis" || st.attrs["sluice.script"] != "token_bucket" {
			t.Errorf("store span %s: %v", addr, st.attrs)
		}
		if ps, _ := st.attrs["sluice.pipeline.size"].(int64); ps < st.attrs["sluice.batch.size"].(int64) {
			t.Errorf("store span %s: pipeline size %d below its batch size", addr, ps)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("store spans' batch sizes by node %v, want the keys' owners %v", got, want)
	}
	if len(want) < 2 {
		t.Errorf("the %d keys all live on one node (%v): the test means to cover several", len(keys), want)
	}

	hd := find(spans, tracing.SpanDecide, map[string]any{"sluice.door": "http"})[0]
	st := childrenOf(spans, hd, tracing.SpanStore)
	if len(st) != 1 || st[0].trace != httpTrace {
		t.Fatalf("HTTP decide span's store children %v, want one in trace %s:\n%s", st, httpTrace, dumpSpans(spans))
	}
	if got, want := fmt.Sprintf("%v:%v", st[0].attrs["server.address"], st[0].attrs["server.port"]), owner("http:store"); got != want {
		t.Errorf("HTTP take's store span names node %s, want its owner %s", got, want)
	}
}

// TestTracingFlushOnShutdown: the spans still queued when SIGTERM comes
// are sent before the process exits. The batch processor's delay is ten
// minutes, so nothing goes out while the process runs; the request's
// spans are at the receiver once it has exited.
func TestTracingFlushOnShutdown(t *testing.T) {
	rcv := newReceiver(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
	t.Setenv("OTEL_SERVICE_NAME", "sluice-eu") // a deployment's name for its instances wins
	p, h := startWithHTTP(t, "--otlp-endpoint", rcv.srv.URL, "--config", writeConfig(t, tracingConfig))
	tp, traceID, _ := traceparent(t, 7, true)
	hc := &http.Client{Timeout: 5 * time.Second}
	if a := call(t, hc, "POST", "http://"+h+"/v1/take", `{"key":"http:bye"}`, "traceparent", tp); a.status != 200 {
		t.Fatalf("take: %d %v", a.status, a.body)
	}
	if n := len(rcv.snapshot()); n != 0 {
		t.Fatalf("%d spans sent before shutdown despite a 10-minute batch delay: this test cannot see a flush", n)
	}
	p.Signal(syscall.SIGTERM)
	if err := p.Wait(20 * time.Second); err != nil {
		t.Fatalf("sluice after SIGTERM: %v", err)
	}
	var names []string
	for _, s := range rcv.snapshot() {
		if s.trace == traceID {
			names = append(names, s.name)
		}
		if got := s.resource["service.name"]; got != "sluice-eu" {
			t.Errorf("resource service.name %v, want OTEL_SERVICE_NAME's sluice-eu", got)
		}
	}
	slices.Sort(names)
	if got, want := strings.Join(names, ", "), "POST /v1/take, sluice.decide"; got != want {
		t.Errorf("spans of the request at exit: [%s], want [%s]", got, want)
	}
}

// TestTracingCollectorDown: a collector that does not answer costs no
// decision anything: requests are answered as ever, and the log says
// why spans are not delivered.
func TestTracingCollectorDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	p, base, _ := startTraced(t, dead)
	hc := &http.Client{Timeout: 5 * time.Second}
	for i := range 5 {
		if a := call(t, hc, "POST", base+"/v1/take", `{"key":"http:down"}`); a.status != 200 || a.by() != "embedded" {
			t.Fatalf("take %d with the collector down: %d %v", i, a.status, a.body)
		}
	}
	pipelineTakes(t, p.client(t), []string{"resp:d1", "resp:d2"})
	if !p.waitLog(`msg="tracing: OpenTelemetry SDK error"`, 30*time.Second) {
		t.Fatalf("no log line about the undelivered spans:\n%s", p.Logs())
	}
}
