package layercheck

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/policy"
)

// The policies: one family per layer. Keys are spelled from a family's
// base (tb.i7.a); other spellings of it ({tb.i7.a}, {t7}tb.i7.a, {}tb.i7.a)
// fall to "braced", and internal-looking ones (a floor key, sluice:…) to
// the catch-all: different user keys under different policies.
// cfg(true) is the config a SIGHUP may swap in.
func cfg(alt bool) string {
	tb, fw, gc, cd := "limit: 6, rate: 3", "limit: 4", "limit: 5, rate: 5", "limit: 6"
	if alt {
		tb, fw, gc, cd = "limit: 4, rate: 2", "limit: 6", "limit: 3, rate: 6", "limit: 9"
	}
	return `defaults: {on_store_error: closed}
policies:
  - {name: tb, match: "tb.*", algorithm: token_bucket, ` + tb + `, period: 1s}
  - {name: gc, match: "gc.*", algorithm: gcra, ` + gc + `, period: 2s}
  - {name: sw, match: "sw.*", algorithm: sliding_window, limit: 5, period: 1s}
  - {name: fw, match: "fw.*", algorithm: fixed_window, ` + fw + `, period: 1s}
  - {name: dk, match: "dk.*", limit: 2, rate: 1, period: 1s, shadow: true}
  - {name: hl, match: "hl.*", limit: 20, rate: 10, period: 1s, hot: {mode: lease, threshold: 20}}
  - {name: hs, match: "hs.*", limit: 16, rate: 8, period: 1s, hot: {mode: split, threshold: 20, split: 4}}
  - {name: gl, match: "gl.*.g", limit: 10, rate: 5, period: 1s, scope: global, region_floor: 0.2}
  - {name: gwu, match: "gw:user=*", algorithm: fixed_window, limit: 5, period: 1s}
  - {name: gwa, match: "gw:acct=*", algorithm: token_bucket, limit: 4, rate: 4, period: 1s}
  - {name: cd, match: "cd.*", calendar: day, timezone: Asia/Kolkata, ` + cd + `}
  - {name: cc, match: "cc.*", algorithm: concurrency, limit: 3, period: 1s}
  - {name: evc, match: "ev.cc.*", algorithm: concurrency, limit: 3, period: 1s}
  - {name: ev, match: "ev.*", limit: 5, rate: 5, period: 1s}
  - {name: lo, match: "lo.*", algorithm: token_bucket, limit: 6, rate: 3, period: 1s, on_store_error: local, local_share: 0.5, deny_cache: false}
  - {name: lg, match: "lg.*", algorithm: gcra, limit: 6, rate: 6, period: 2s, on_store_error: local, local_share: 0.5}
  - {name: du, match: "du.*", algorithm: token_bucket, limit: 6, rate: 3, period: 1s, durability: replica, deny_cache: false}
  - {name: op, match: "op.*", algorithm: token_bucket, limit: 5, rate: 5, period: 1s, on_store_error: open, deny_cache: false}
  - {name: og, match: "og.*", algorithm: gcra, limit: 4, rate: 4, period: 2s, on_store_error: open}
  - {name: braced, match: "{*", limit: 30, rate: 15, period: 1s}
  - {name: all, match: "*", limit: 8, rate: 4, period: 1s}
`
}

// The Envoy rules of the gRPC door: the same numbers as gwu and gwa, so
// both doors bound those keys alike.
const envoyRules = `domain: gw
on_store_error: closed
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: acct
    rate_limit: {unit: second, requests_per_unit: 4, algorithm: token_bucket}
`

// runtimeChanges are the RL.POLICY SET bodies an action may apply, by the
// file policy they replace (same match, so the same keys).
var runtimeChanges = map[string][]string{
	"tb": {`{"match": "tb.*", "algorithm": "gcra", "limit": 6, "rate": 3, "period": "1s", "on_store_error": "closed"}`,
		`{"match": "tb.*", "algorithm": "token_bucket", "limit": 3, "rate": 3, "period": "1s", "on_store_error": "closed"}`},
	"fw": {`{"match": "fw.*", "algorithm": "sliding_window", "limit": 4, "period": "1s", "on_store_error": "closed"}`,
		`{"match": "fw.*", "algorithm": "fixed_window", "limit": 7, "period": "1s", "on_store_error": "closed"}`},
	"sw": {`{"match": "sw.*", "algorithm": "fixed_window", "limit": 5, "period": "1s", "on_store_error": "closed"}`},
	"gc": {`{"match": "gc.*", "algorithm": "token_bucket", "limit": 5, "rate": 5, "period": "2s", "on_store_error": "closed"}`},
	"gl": {`{"match": "gl.*.g", "scope": "regional", "limit": 10, "rate": 5, "period": "1s", "on_store_error": "closed"}`},
	"cd": {`{"match": "cd.*", "calendar": "month", "timezone": "America/New_York", "limit": 8, "on_store_error": "closed"}`,
		`{"match": "cd.*", "algorithm": "fixed_window", "limit": 3, "period": "1d", "on_store_error": "closed"}`},
}

// cl is the CL.THROTTLE limit every call uses: burst 3, 4 per 2 s.
var cl = Variant{Name: "cl.throttle", Algorithm: "gcra", Limit: 3, Rate: 4, Period: 2 * time.Second}

const (
	clArgs      = "2 4 2"
	runtimeProp = 1500 * time.Millisecond // a runtime policy reaches every instance within 500 ms; margin for this busy machine
	reloadProp  = 100 * time.Millisecond
)

var slack = Slack{Lease: 300 * time.Millisecond, Pool: 300 * time.Millisecond, Reset: 300 * time.Millisecond, Instances: 2}

func variantOf(p *limit.Policy) Variant {
	alg := string(p.Algorithm)
	if alg == "" {
		alg = "token_bucket"
	}
	hot := ""
	if p.Hot.Mode == limit.HotLease || p.Hot.Mode == limit.HotSplit {
		hot = string(p.Hot.Mode)
	}
	share := p.LocalShare
	if share == 0 {
		share = 1 // zero means 1.0 (limit.Policy)
	}
	return Variant{Name: p.Name, Algorithm: alg, Limit: p.Limit, Rate: p.Rate, Period: p.Period,
		Global: p.Global(), Floor: p.RegionFloor, Hot: hot, Shadow: p.Shadow, Calendar: string(p.Calendar), Zone: p.Zone,
		OnStoreError: string(p.OnStoreError), LocalShare: share, Durability: string(p.Durability)}
}

func parseSet(t testing.TB, yaml string) (*policy.Set, map[string]Variant) {
	t.Helper()
	s, err := policy.Parse([]byte(yaml), "layercheck.yaml")
	if err != nil {
		t.Fatal(err)
	}
	vs := map[string]Variant{}
	for _, name := range []string{"tb", "gc", "sw", "fw", "dk", "hl", "hs", "gl", "gwu", "gwa", "braced", "all", "cd", "ev", "lo", "lg", "op", "og", "du"} {
		vs[name] = variantOf(s.Lookup(name))
	}
	return s, vs
}

// world is what lives across rapid's iterations: the processes, the
// policies in force and the run's counters.
type world struct {
	procs   []*proc
	match   *policy.Set
	base    map[string]Variant
	alt     map[string]Variant
	tracker *Tracker

	mu        sync.Mutex
	file      []map[string]Variant // per process
	fileAlt   []bool
	overrides map[string]Variant
	iter      int
	settled   map[string]time.Time // by policy name: its last change is in force everywhere after it
	keepGoing bool                 // LAYERCHECK_KEEPGOING: record violations, fail once at the end
	skip      map[string]bool      // LAYERCHECK_SKIP: actions left out (to tell one bug from another)
	plainKeys bool                 // LAYERCHECK_PLAIN: only each family's plain spelling
	stats     stats
	nem       *nemesis   // nil: no faults (TestLayers)
	cur       *iteration // the iteration running (the nemesis moves its keys' slots)
	notedCmd  map[string]bool
}

type stats struct {
	ops          map[string]int
	by           map[string]int
	keys         int
	violations   []string
	inconclusive int
	categories   map[string]int
	firstTrace   []string // the actions of the first iteration with a violation
	examples     map[string]string
	regionMax    *RegionExcess
	iterations   int
	slotsMost    int                // the most slots of a cc key certainly held at once
	refused      int                // the rival's commands on the owner's keys refused as they must be
	backs        map[string]*[2]int // give-backs by receipt mode: answered as applied, refused
	probes       int                // peeks before and after a refused command (unspent)
	validRefused map[string]int     // the errors of give-backs with a receipt still good by the model
	excess       []Excess           // what Check attributed to faults and fallbacks
	fallbackAdm  int                // admissions decided by a fallback or the overload path, checked as such
	fallbackBy   map[string]int     // fallback and overload decisions by policy/decided_by
	slotsLost    map[string]int     // by fault kind: the most slots held past the limit, within what the store may have forgotten
}

func (w *world) effective() map[Variant]bool {
	set := map[Variant]bool{}
	for i := range w.procs {
		for name, v := range w.file[i] {
			if o, ok := w.overrides[name]; ok {
				v = o
			}
			set[v] = true
		}
	}
	return set
}

// change applies mut (under w.mu) and records which variants it started
// (from sent) and ended (after recv + prop).
func (w *world) change(mut func(), sent, recv time.Time, prop time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	before := w.effective()
	mut()
	after := w.effective()
	for v := range before {
		if !after[v] {
			w.tracker.Close(v, recv.Add(prop))
			w.settle(v.Name, recv.Add(prop))
		}
	}
	for v := range after {
		if !before[v] {
			w.tracker.Open(v, sent)
			w.settle(v.Name, recv.Add(prop))
		}
	}
}

// settle records that name's policy is in force everywhere after end, w.mu held.
func (w *world) settle(name string, end time.Time) {
	if w.settled == nil {
		w.settled = map[string]time.Time{}
	}
	if end.After(w.settled[name]) {
		w.settled[name] = end
	}
}

func (w *world) count(kind string) {
	w.mu.Lock()
	w.stats.ops[kind]++
	w.mu.Unlock()
}

// iteration is one rapid test case: its keys and what they saw.
type iteration struct {
	w     *world
	n     int
	start time.Time
	mu    sync.Mutex
	rl    map[string]*KeyLog
	cl    map[string]*KeyLog
	trace []string
	bases map[string]string // spelled key → the base it was spelled from
	slots []*slot           // RL.ACQUIRE's grants (layers_slots_test.go)
	// receipts are the receipts of admitted takes (hostile_test.go);
	// found the categories of violations found outside Check.
	receipts []*receipt
	found    []string
}

func (it *iteration) log(key string, throttle bool) *KeyLog {
	m := it.rl
	if throttle {
		m = it.cl
	}
	k := m[key]
	if k == nil {
		k = &KeyLog{Key: key, Policy: it.w.match.Match(key).Name, Slots: it.w.slotsOf(key, throttle)}
		if throttle {
			// the caller's numbers, the failure policy of the policy
			// the key matches (docs/commands.md)
			f := cl
			if v, ok := it.w.base[k.Policy]; ok {
				f.OnStoreError, f.LocalShare = v.OnStoreError, v.LocalShare
			}
			k.Fixed = &f
		}
		m[key] = k
	}
	return k
}

// record books one RL reply of key, answered by process proc. Every
// admission is booked, fallback-* and overload-* ones too (with their By
// and process: Check bounds them by the policy's failure policy).
func (it *iteration) record(door, key, proc string, cost int64, sent, recv time.Time, r reply, count bool) {
	it.mu.Lock()
	defer it.mu.Unlock()
	k := it.log(key, false)
	it.w.mu.Lock()
	it.w.stats.by[r.DecidedBy]++
	fallback := strings.HasPrefix(r.DecidedBy, "fallback-") || strings.HasPrefix(r.DecidedBy, "overload-")
	if fallback && count && r.Allowed == 1 {
		it.w.stats.fallbackAdm++
	}
	if fallback {
		if it.w.stats.fallbackBy == nil {
			it.w.stats.fallbackBy = map[string]int{}
		}
		it.w.stats.fallbackBy[k.Policy+"/"+r.DecidedBy]++
	}
	it.w.mu.Unlock()
	switch {
	case r.DecidedBy == limit.ByShadow:
	case count && r.Allowed == 1:
		k.Adm = append(k.Adm, Admission{Sent: sent, Recv: recv, Cost: cost, By: r.DecidedBy, Door: door, Proc: proc})
	}
}

func (it *iteration) ms(t time.Time) int64 { return t.Sub(it.start).Milliseconds() }

// logf logs one action, compactly, to rapid (which prints the sequence of
// a failing test case) and to the iteration's own trace (printed for the
// first violating iteration, also when rapid cannot reproduce it).
func (it *iteration) logf(t *rapid.T, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	t.Log(s)
	it.mu.Lock()
	it.trace = append(it.trace, s)
	it.mu.Unlock()
}

// keys of an iteration: a family's base, spelled one of several ways.
var families = []string{"tb", "gc", "sw", "fw", "dk", "hl", "hs", "gl", "zz", "gwu", "gwa", "cd", "lo", "lg", "op", "og", "du"}

func (it *iteration) base(fam, id string) string {
	switch fam {
	case "gl":
		return fmt.Sprintf("gl.i%d.%s.g", it.n, id)
	case "gwu":
		return fmt.Sprintf("gw:user=i%d%s", it.n, id)
	case "gwa":
		return fmt.Sprintf("gw:acct=i%d%s", it.n, id)
	}
	return fmt.Sprintf("%s.i%d.%s", fam, it.n, id)
}

func (it *iteration) spell(b string, s int) string {
	k := it.spellAs(b, s)
	it.mu.Lock()
	if it.bases == nil {
		it.bases = map[string]string{}
	}
	it.bases[k] = b
	it.mu.Unlock()
	return k
}

func (it *iteration) spellAs(b string, s int) string {
	switch s {
	case 1:
		return "{" + b + "}"
	case 2:
		return fmt.Sprintf("{t%d}%s", it.n, b)
	case 3:
		return b + "}"
	case 4:
		return "{}" + b
	case 5:
		return subKey(b, 1) // a split sub-bucket's key, as hotkey spells it
	case 6:
		return b + "\x00region-floor" // a region floor's key, as region spells it
	case 7:
		return "sluice:{" + b + "}"
	case 8:
		return splitKey(b, 1) // a sub-bucket's key as the split space spells it now
	}
	return b
}

func (it *iteration) drawKey(t *rapid.T, label string) string {
	fam := rapid.SampledFrom(families).Draw(t, label+".family")
	id := rapid.SampledFrom([]string{"a", "b"}).Draw(t, label+".id")
	s := rapid.IntRange(0, 15).Draw(t, label+".spelling")
	if s > 7 || it.w.plainKeys {
		s = 0
	}
	return it.spell(it.base(fam, id), s)
}

func (w *world) pick(t *rapid.T) (int, *proc) {
	i := rapid.IntRange(0, len(w.procs)-1).Draw(t, "proc")
	return i, w.procs[i]
}

func (it *iteration) takeOne(t *rapid.T, ctx context.Context, p *proc, door, key string, cost int64) (reply, error) {
	sent := time.Now()
	var r reply
	var err error
	if door == "http" {
		r, err = p.httpTake(ctx, key, cost)
	} else {
		r, err = p.take(ctx, "RL.TAKE", key, cost)
	}
	recv := time.Now()
	if err != nil {
		return r, err
	}
	if e := shapeError(r, cost); e != "" {
		t.Logf("%s %s %q %d -> %v", door, p.name, key, cost, r)
		it.shapeFinding(t, door+": "+e, fmt.Sprintf("%s %s %q %d at %s -> %v", door, p.name, key, cost, sent.Format("15:04:05.000"), r))
		return r, nil
	}
	it.record(door, key, p.name, cost, sent, recv, r, true)
	return r, nil
}

func drawCost(t *rapid.T, label string) int64 {
	return int64(rapid.SampledFrom([]int{1, 1, 1, 1, 2, 3}).Draw(t, label))
}

func (it *iteration) actions(ctx context.Context) map[string]func(*rapid.T) {
	w := it.w
	return map[string]func(*rapid.T){
		"take": func(t *rapid.T) {
			_, p := w.pick(t)
			key, cost := it.drawKey(t, "key"), drawCost(t, "cost")
			sent := time.Now()
			r, err := it.takeOne(t, ctx, p, "resp", key, cost)
			if err != nil {
				it.opError(t, p, sent, time.Now(), err, "RL.TAKE %q %d", key, cost)
				return
			}
			w.count("take")
			it.logf(t, "%5d take %s %q %d -> %v", it.ms(time.Now()), p.name, key, cost, r)
		},
		"http": func(t *rapid.T) {
			_, p := w.pick(t)
			key, cost := it.drawKey(t, "key"), drawCost(t, "cost")
			sent := time.Now()
			r, err := it.takeOne(t, ctx, p, "http", key, cost)
			if err != nil {
				it.opError(t, p, sent, time.Now(), err, "HTTP take %q %d", key, cost)
				return
			}
			w.count("http")
			it.logf(t, "%5d http %s %q %d -> %v", it.ms(time.Now()), p.name, key, cost, r)
		},
		"peek": func(t *rapid.T) {
			_, p := w.pick(t)
			key := it.drawKey(t, "key")
			sent := time.Now()
			r, err := p.take(ctx, "RL.PEEK", key, 1)
			if err != nil {
				it.opError(t, p, sent, time.Now(), err, "RL.PEEK %q", key)
				return
			}
			if e := shapeError(r, 1); e != "" {
				t.Logf("peek %s %q -> %v", p.name, key, r)
				t.Fatalf("reply shape (peek): %s", e)
			}
			w.count("peek")
			it.logf(t, "%5d peek %s %q -> %v", it.ms(time.Now()), p.name, key, r)
		},
		"mtake": func(t *rapid.T) { it.mtake(t, ctx) },
		"throttle": func(t *rapid.T) {
			_, p := w.pick(t)
			key := it.drawKey(t, "key")
			if it.w.match.Match(key).Shadow {
				return // a shadow policy's shadow applies to CL.THROTTLE: it always admits
			}
			q := int64(rapid.IntRange(1, 2).Draw(t, "quantity"))
			sent := time.Now()
			v, err := p.rc.Do(ctx, append([]any{"CL.THROTTLE", key}, clArgsAny(q)...)...).Int64Slice()
			recv := time.Now()
			if err != nil {
				it.opError(t, p, sent, recv, err, "CL.THROTTLE %q", key)
				return
			}
			if len(v) != 5 || (v[0] != 0 && v[0] != 1) || v[1] != cl.Limit && v[1] != throttleShare(it.w.match.Match(key)) || v[2] < 0 || v[2] > v[1] || (v[0] == 0) != (v[3] == -1) && q <= v[1] {
				t.Logf("throttle %s %q %s %d -> %v", p.name, key, clArgs, q, v)
				it.shapeFinding(t, "CL.THROTTLE", fmt.Sprintf("throttle %s %q %s %d at %s -> %v", p.name, key, clArgs, q, sent.Format("15:04:05.000"), v))
				return
			}
			if v[0] == 0 {
				it.mu.Lock()
				k := it.log(key, true)
				k.Adm = append(k.Adm, Admission{Sent: sent, Recv: recv, Cost: q, By: throttleBy(v, q, it.w.match.Match(key)), Door: "cl", Proc: p.name})
				it.mu.Unlock()
			}
			w.count("throttle")
			it.logf(t, "%5d throttle %s %q %s %d -> %v", it.ms(recv), p.name, key, clArgs, q, v)
		},
		"reset": func(t *rapid.T) {
			_, p := w.pick(t)
			key := it.drawKey(t, "key")
			sent := time.Now()
			n, err := p.rc.Do(ctx, "RL.RESET", key).Int64()
			recv := time.Now()
			// during a store fault or a kill of p, the reset is sent
			// again until it is answered: it was done somewhere in
			// [the first send, the answer]
			for w.retryable("RL.RESET", p, sent, recv, err) {
				n, err = p.rc.Do(ctx, "RL.RESET", key).Int64()
				recv = time.Now()
			}
			if err != nil && w.unknownOutcome(p, sent, recv, err) {
				err = errors.New("store unavailable: its process was killed")
			}
			if err != nil && !strings.Contains(err.Error(), "store unavailable") {
				t.Fatalf("RL.RESET %q on %s: %v", key, p.name, err)
			}
			it.mu.Lock()
			for _, k := range []*KeyLog{it.log(key, false), it.log(key, true)} {
				k.Resets = append(k.Resets, Interval{sent, recv})
				if err != nil {
					// a store that did not answer in time (a loaded
					// machine) may or may not have reset the key: like a
					// fallback decision, it makes the key inconclusive
					k.Fallback = append(k.Fallback, "reset-unavailable")
				}
			}
			it.mu.Unlock()
			w.count("reset")
			it.logf(t, "%5d reset %s %q -> %d", it.ms(recv), p.name, key, n)
		},
		"policy": func(t *rapid.T) {
			_, p := w.pick(t)
			name := rapid.SampledFrom([]string{"tb", "fw", "sw", "gc", "gl", "cd"}).Draw(t, "policy")
			del := rapid.Bool().Draw(t, "del")
			if del {
				sent := time.Now()
				n, err := p.rc.Do(ctx, "RL.POLICY", "DEL", name).Int64()
				recv := time.Now()
				for w.retryable("RL.POLICY", p, sent, recv, err) { // done in [the first send, the answer]
					n, err = p.rc.Do(ctx, "RL.POLICY", "DEL", name).Int64()
					recv = time.Now()
				}
				if err != nil {
					t.Fatalf("RL.POLICY DEL %s: %v", name, err)
				}
				w.change(func() { delete(w.overrides, name) }, sent, recv, runtimeProp)
				w.count("policy-del")
				it.logf(t, "%5d policy %s DEL %s -> %d", it.ms(recv), p.name, name, n)
				return
			}
			body := rapid.SampledFrom(runtimeChanges[name]).Draw(t, "body")
			pol, err := policy.ParsePolicyJSON(name, []byte(body))
			if err != nil {
				t.Fatalf("runtime policy %s %s: %v", name, body, err)
			}
			sent := time.Now()
			err = p.rc.Do(ctx, "RL.POLICY", "SET", name, body).Err()
			recv := time.Now()
			for w.retryable("RL.POLICY", p, sent, recv, err) { // done in [the first send, the answer]
				err = p.rc.Do(ctx, "RL.POLICY", "SET", name, body).Err()
				recv = time.Now()
			}
			if err != nil {
				t.Fatalf("RL.POLICY SET %s %s: %v", name, body, err)
			}
			w.change(func() { w.overrides[name] = variantOf(pol) }, sent, recv, runtimeProp)
			w.count("policy-set")
			it.logf(t, "%5d policy %s SET %s %s", it.ms(recv), p.name, name, variantOf(pol))
		},
		"sighup": func(t *rapid.T) {
			i, p := w.pick(t)
			w.mu.Lock()
			alt := !w.fileAlt[i]
			w.mu.Unlock()
			if err := it.reload(i, alt); err != nil {
				t.Fatal(err)
			}
			w.count("sighup")
			it.logf(t, "%5d sighup %s alt=%v", it.ms(time.Now()), p.name, alt)
		},
		"grpc": func(t *rapid.T) { it.grpc(t, ctx) },
		"wait": func(t *rapid.T) {
			d := time.Duration(rapid.IntRange(0, 300).Draw(t, "ms")) * time.Millisecond
			time.Sleep(d) // part of the workload: time passes, windows roll
			w.count("wait")
			it.logf(t, "%5d wait %v", it.ms(time.Now()), d)
		},
		"burst":         func(t *rapid.T) { it.burst(t, ctx) },
		"acquire":       func(t *rapid.T) { it.acquire(t, ctx) },
		"release":       func(t *rapid.T) { it.release(t, ctx) },
		"acquire-burst": func(t *rapid.T) { it.acquireBurst(t, ctx) },
		"hotkeys": func(t *rapid.T) {
			_, p := w.pick(t)
			sent := time.Now()
			v, err := p.rc.Do(ctx, "RL.HOTKEYS").Slice()
			if err != nil {
				it.opError(t, p, sent, time.Now(), err, "RL.HOTKEYS")
				return
			}
			w.count("hotkeys")
			var hot []string // key/mode of this iteration's keys only
			for _, e := range v {
				f, _ := e.([]any)
				if len(f) >= 6 && strings.Contains(fmt.Sprint(f[1]), fmt.Sprintf(".i%d.", it.n)) {
					hot = append(hot, fmt.Sprintf("%v/%v", f[1], f[5]))
				}
			}
			it.logf(t, "%5d hotkeys %s -> %d hot, here: %v", it.ms(time.Now()), p.name, len(v), hot)
		},
		"adjust":    func(t *rapid.T) { it.adjust(t, ctx) },
		"give-back": func(t *rapid.T) { it.adjustReceipt(t, ctx) },
		"take-receipt": func(t *rapid.T) {
			_, p := w.pick(t)
			it.takeWithReceipt(t, ctx, p, p.tenant, it.drawKey(t, "key"), drawCost(t, "cost"))
		},
		"rival":     func(t *rapid.T) { it.rivalOnOwner(t, ctx) },
		"rival-own": func(t *rapid.T) { it.rivalOwn(t, ctx) },
	}
}

// throttleShare is the limit a CL.THROTTLE reply of the local fallback
// reports for a key of policy p: the caller's limit scaled by the policy's
// local_share (limit.Policy.Share), the bucket that decided; 0 when p has
// no share below 1. (A fallback's reply reports the limit of the bucket
// that decided, for RL.TAKE and CL.THROTTLE alike: found by the nemesis
// as [0 1 0 -1 1] for CL.THROTTLE k 2 4 2 under a freeze, limit 1 of 3.)
func throttleShare(p *limit.Policy) int64 {
	if p == nil || p.LocalShare <= 0 || p.LocalShare >= 1 {
		return 0
	}
	return (&limit.Policy{Limit: cl.Limit, Rate: cl.Rate, LocalShare: p.LocalShare}).Share().Limit
}

// throttleBy is the path that decided an admitted CL.THROTTLE reply v of
// quantity q, which has no decided_by field: the local fallback reports
// its share's limit (throttleShare), the open fallback the whole burst
// left ("nothing is known of the bucket: report it as untouched"), which
// the store never does after admitting q ≥ 1; else the store ("cl").
func throttleBy(v []int64, q int64, p *limit.Policy) string {
	switch {
	case v[1] != cl.Limit && v[1] == throttleShare(p):
		return limit.ByFallbackLocal
	case q >= 1 && v[2] == v[1]:
		return limit.ByFallbackOpen
	}
	return "cl"
}

func clArgsAny(q int64) []any {
	var out []any
	for _, f := range strings.Fields(clArgs) {
		out = append(out, f)
	}
	return append(out, q)
}

// reload makes process i's config base or alt, by SIGHUP.
func (it *iteration) reload(i int, alt bool) error {
	w := it.w
	yaml := cfg(alt)
	sent, recv, err := w.procs[i].reload(yaml)
	if err != nil {
		return err
	}
	w.change(func() {
		w.fileAlt[i] = alt
		if alt {
			w.file[i] = w.alt
		} else {
			w.file[i] = w.base
		}
	}, sent, recv, reloadProp)
	return nil
}

// restore puts the policies back to the files' base before an iteration,
// so that each test case starts from one state (and shrinks).
func (it *iteration) restore(t *rapid.T, ctx context.Context) {
	w := it.w
	w.mu.Lock()
	var names []string
	for name := range w.overrides {
		names = append(names, name)
	}
	alts := append([]bool(nil), w.fileAlt...)
	w.mu.Unlock()
	for _, name := range names {
		sent := time.Now()
		err := w.procs[0].rc.Do(ctx, "RL.POLICY", "DEL", name).Err()
		for w.retryable("RL.POLICY", w.procs[0], sent, time.Now(), err) {
			err = w.procs[0].rc.Do(ctx, "RL.POLICY", "DEL", name).Err()
		}
		if err != nil {
			t.Fatalf("restore: RL.POLICY DEL %s: %v", name, err)
		}
		w.change(func() { delete(w.overrides, name) }, sent, time.Now(), runtimeProp)
	}
	for i, alt := range alts {
		if alt {
			if err := it.reload(i, false); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// check runs Check on every key of the iteration. A violation is logged
// with the key, its admissions and the bound; the failure message itself
// names only the first violation's category, so that rapid sees the same
// error while it shrinks the sequence (its keys and times change each run).
func (it *iteration) check(t *rapid.T) {
	w := it.w
	it.mu.Lock()
	defer it.mu.Unlock()
	var cats []string
	var logs []*KeyLog
	for _, k := range it.rl {
		logs = append(logs, k)
	}
	for _, k := range it.cl {
		logs = append(logs, k)
	}
	sort.Slice(logs, func(i, j int) bool {
		return logs[i].Key < logs[j].Key || logs[i].Key == logs[j].Key && logs[i].Fixed == nil
	})
	for _, k := range logs {
		res := Check(k, w.tracker.Spans(k.Policy), slack, w.faults())
		w.mu.Lock()
		w.stats.excess = append(w.stats.excess, res.Excess...)
		if !res.Checked {
			w.stats.inconclusive++
			t.Logf("key %q inconclusive: %d fallback/overload decisions (%v)", k.Key, len(k.Fallback), k.Fallback[0])
		}
		for _, r := range res.Region {
			if w.stats.regionMax == nil || float64(r.Admitted)-r.Bound > float64(w.stats.regionMax.Admitted)-w.stats.regionMax.Bound {
				w.stats.regionMax = &r
			}
		}
		for _, v := range res.Violations {
			what := "RL"
			if k.Fixed != nil {
				what = "CL.THROTTLE " + clArgs
			}
			cat := fmt.Sprintf("%s policy %s %s check, doors %s", what, v.Policy, v.Kind, doors(v.By))
			near := ""
			if w.nem != nil {
				near = " " + w.nem.faultsAt(v.From, v.To) + fmt.Sprintf("; the key's slots %v", k.Slots)
			}
			detail := what + " " + v.String() + near + "\n    admissions (ms since the iteration's start: sent-recv cost door/by): " + it.admissions(k) +
				"\n    the actions on it, its other spellings and the policies:\n      " + strings.Join(it.about(k.Key), "\n      ")
			if w.stats.categories[cat] == 0 {
				w.stats.examples[cat] = detail
			}
			if w.stats.firstTrace == nil {
				w.stats.firstTrace = append([]string{fmt.Sprintf("iteration %d: %s", it.n, detail)}, it.trace...)
			}
			w.stats.categories[cat]++
			w.stats.violations = append(w.stats.violations, detail)
			t.Logf("VIOLATION %s", detail)
			cats = append(cats, cat)
		}
		w.mu.Unlock()
	}
	cats = append(cats, it.checkSlots(t)...)
	cats = append(cats, it.found...)
	if len(cats) > 0 && !w.keepGoing {
		// One message for every violation: rapid shrinks towards any
		// violation (the VIOLATION lines say which), and a timing-dependent
		// one reproduces more often.
		t.Fatalf("violation of limit + rate × T (windows: limit per window); see the VIOLATION lines")
	}
}
