package layercheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"pgregory.net/rapid"

	"github.com/sluice-rl/sluice/limit"
)

// Two tenants (issue 28 §4). The owner runs the whole workload of the
// other actions, on every family's keys, and may run every command; the
// rival is another tenant, whose own keys are ev.* (policy ev, and evc
// for slots), with @limit, @slot, @adjust and @read on them only. The
// rival sends on the owner's keys everything it may not (every command,
// through every door), and on its own keys what it may, with receipts
// that are its own, reused, forged or the owner's. What the contract
// refuses must be refused, and must change nothing: checked from the
// replies (a permission or receipt violation when one is answered as
// done), by the bound (a refused give-back or reset earns no credit, so
// any take it lets through beyond limit + rate × T is a violation), and
// by the owner's peeks around a refused take (it must not have spent).
var (
	owner = creds{"owner", "owner-secret-7f3a"}
	rival = creds{"rival", "rival-secret-91c2"}
)

// aclFile is the users of the run, in Redis's ACL file syntax.
const aclFile = `user default off
user owner on >owner-secret-7f3a ~* +@all
user rival on >rival-secret-91c2 ~ev.* +@limit +@slot +@adjust +@read
`

// The refusals the doors answer for a user without the right: RESP's
// error prefix, HTTP's status, gRPC's code.
const (
	respNoPerm = "NOPERM"
	httpNoPerm = http.StatusForbidden
	grpcNoPerm = codes.PermissionDenied
)

// permission records one violation of kind permission: the rival's
// command cmd on key, which the contract refuses, was answered got.
func (it *iteration) permission(t *rapid.T, key, cmd, got string) {
	pol := ""
	if p := it.w.match.Match(key); p != nil {
		pol = p.Name
	}
	now := time.Now()
	it.violation(t, fmt.Sprintf("rival policy %s permission check, %s", pol, strings.Fields(cmd)[0]),
		Violation{Key: key, Policy: pol, Kind: "permission", From: now, To: now,
			Note: fmt.Sprintf("the rival's %s, which it may not run, was answered %s", cmd, got)}.String())
}

// violation books one violation found outside Check (the rival's
// permission and spend checks), in category cat.
func (it *iteration) violation(t *rapid.T, cat, detail string) {
	it.mu.Lock() // it.mu before w.mu, as check takes them
	defer it.mu.Unlock()
	it.found = append(it.found, cat)
	w := it.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stats.categories[cat] == 0 {
		w.stats.examples[cat] = detail
	}
	if w.stats.firstTrace == nil {
		w.stats.firstTrace = append([]string{fmt.Sprintf("iteration %d: %s", it.n, detail)}, it.trace...)
	}
	w.stats.categories[cat]++
	w.stats.violations = append(w.stats.violations, detail)
	t.Logf("VIOLATION %s", detail)
}

// refusedRESP reports whether err is the RESP door's refusal for want of
// a permission.
func refusedRESP(err error) bool { return err != nil && strings.HasPrefix(err.Error(), respNoPerm) }

// forged returns a receipt or token of the right shape that nobody was
// given: 32 lower-case hex digits.
func forged() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// probeable reports whether the owner's peek of key shows, by remaining,
// whether anything was spent between two peeks on one process: a bucket
// or window key off the hot and global paths, not shadow, while no change
// of its policy is on its way to an instance.
func (it *iteration) probeable(key string) bool {
	p := it.w.match.Match(key)
	if p == nil || p.Shadow || p.Global() || p.Algorithm.IsConcurrency() || strings.HasPrefix(p.Name, "h") {
		return false
	}
	it.w.mu.Lock()
	defer it.w.mu.Unlock()
	return time.Now().After(it.w.settled[p.Name])
}

// unspent peeks key as the tenant tn before and after do, the rival's
// command what, and books a violation when the second peek shows less
// left than the first: do was refused, and must have spent nothing. A peek spends nothing, and
// between the two only do and time (which refills) passed.
func (it *iteration) unspent(t *rapid.T, ctx context.Context, p *proc, tn *tenant, key, what string, do func()) {
	if !it.probeable(key) {
		do()
		return
	}
	it.w.mu.Lock()
	it.w.stats.probes++
	it.w.mu.Unlock()
	sent := time.Now()
	before, err := tn.take(ctx, "RL.PEEK", key, 1)
	if err != nil {
		it.opError(t, p, sent, time.Now(), err, "RL.PEEK %q by %s", key, tn.role)
		do()
		return
	}
	do()
	sent = time.Now()
	after, err := tn.take(ctx, "RL.PEEK", key, 1)
	if err != nil {
		it.opError(t, p, sent, time.Now(), err, "RL.PEEK %q by %s", key, tn.role)
		return
	}
	if before.DecidedBy != limit.ByStore || after.DecidedBy != limit.ByStore {
		return // a fallback, overload or deny-cache answer says nothing of the bucket
	}
	if after.Limit == before.Limit && after.Remaining < before.Remaining {
		it.violation(t, "rival spend check, "+strings.Fields(what)[0], fmt.Sprintf("key %q: the rival's %s, refused, spent: %s's peek showed remaining %d before and %d after",
			key, what, tn.role, before.Remaining, after.Remaining))
	}
}

// rivalOnOwner is the "rival" action: the rival sends one command on the
// owner's keys, through one door. Each must be refused (NOPERM, 403,
// PermissionDenied) and must change nothing; one answered as an
// admission is booked as one (it spent) as well as a violation.
func (it *iteration) rivalOnOwner(t *rapid.T, ctx context.Context) {
	w := it.w
	_, p := w.pick(t)
	r := p.rival
	what := rapid.SampledFrom([]string{"take", "take-receipt", "peek", "http", "mtake", "throttle", "adjust-back", "adjust-receipt",
		"adjust-spend", "http-adjust", "acquire", "release", "http-release", "reset", "policy-set", "policy-del", "grpc"}).Draw(t, "rival.cmd")
	key := it.drawKey(t, "rival.key")
	if strings.Contains(what, "acquire") || strings.Contains(what, "release") {
		key = it.base("cc", rapid.SampledFrom([]string{"a", "b"}).Draw(t, "rival.cc")) // the owner's slots
	}
	gid := rapid.SampledFrom([]string{"a", "b"}).Draw(t, "rival.grpc.id")
	gentry := rapid.SampledFrom([]string{"user", "acct"}).Draw(t, "rival.grpc.entry")
	if what == "grpc" {
		key = fmt.Sprintf("gw:%s=i%d%s", gentry, it.n, gid)
	}
	cmd := what + " " + key
	got := ""
	admitted := func(door string, cost int64, sent, recv time.Time, rp reply) {
		if rp.Allowed == 1 {
			it.record(door, key, p.name, cost, sent, recv, rp, true)
		}
		got = rp.String()
	}
	began := time.Now()
	it.unspent(t, ctx, p, p.tenant, key, cmd, func() {
		sent := time.Now()
		switch what {
		case "take", "peek":
			c := "RL.TAKE"
			if what == "peek" {
				c = "RL.PEEK" // a read of another tenant's key is refused too
			}
			rp, err := r.take(ctx, c, key, 1)
			if !refusedRESP(err) {
				got = fmt.Sprint(err)
				if err == nil {
					admitted("resp", 1, sent, time.Now(), rp)
				}
			}
		case "take-receipt":
			rp, rc, err := r.takeReceipt(ctx, key, 1)
			if !refusedRESP(err) {
				got = fmt.Sprint(err)
				if err == nil {
					admitted("resp", 1, sent, time.Now(), rp)
					got += " receipt " + rc
				}
			}
		case "http":
			rp, err := r.httpTake(ctx, key, 1)
			if !httpRefused(err) {
				got = fmt.Sprint(err)
				if err == nil {
					admitted("http", 1, sent, time.Now(), rp)
				}
			}
		case "mtake":
			other := it.drawKey(t, "rival.other")
			v, err := r.rc.Do(ctx, "RL.MTAKE", key, 1, other, 1).Result()
			if !refusedRESP(err) {
				got = fmt.Sprintf("%v %v", v, err)
			}
		case "throttle":
			v, err := r.rc.Do(ctx, append([]any{"CL.THROTTLE", key}, clArgsAny(1)...)...).Result()
			if !refusedRESP(err) {
				got = fmt.Sprintf("%v %v", v, err)
			}
		case "adjust-back", "adjust-receipt", "adjust-spend":
			args := []any{"RL.ADJUST", key, -2}
			switch what {
			case "adjust-receipt": // the owner's own receipt, or a forged one
				args = append(args, it.someReceipt(t, key))
			case "adjust-spend":
				args[2] = 3 // spending another's tokens needs the key too
			}
			v, err := r.rc.Do(ctx, args...).Result()
			if !refusedRESP(err) {
				got = fmt.Sprintf("%v %v", v, err)
			}
		case "http-adjust":
			var j map[string]any
			err := r.post(ctx, "/v1/adjust", map[string]any{"key": key, "delta": -2, "receipt": it.someReceipt(t, key)}, &j)
			if !httpRefused(err) {
				got = fmt.Sprintf("%v %v", j, err)
			}
		case "acquire":
			rp, tok, err := r.acquire(ctx, "resp", key, 0)
			if !refusedRESP(err) {
				got = fmt.Sprintf("%v %q %v", rp, tok, err)
			}
		case "release", "http-release":
			door := "resp"
			if what == "http-release" {
				door = "http"
			}
			tok := it.ownerToken()
			held, err := r.release(ctx, door, key, tok)
			if door == "resp" && !refusedRESP(err) || door == "http" && !httpRefused(err) {
				got = fmt.Sprintf("%v %v", held, err)
			}
		case "reset":
			v, err := r.rc.Do(ctx, "RL.RESET", key).Result()
			if !refusedRESP(err) {
				got = fmt.Sprintf("%v %v", v, err)
			}
		case "policy-set", "policy-del":
			name := rapid.SampledFrom([]string{"tb", "fw", "gl", "ev"}).Draw(t, "rival.policy")
			args := []any{"RL.POLICY", "DEL", name}
			if what == "policy-set" {
				args = []any{"RL.POLICY", "SET", name, `{"match": "` + name + `.*", "limit": 1000000, "rate": 1000000, "period": "1s", "on_store_error": "open"}`}
			}
			key, cmd = name, strings.TrimSuffix(strings.Repeat("%v ", len(args)), " ")
			cmd = fmt.Sprintf(cmd, args...)
			v, err := r.rc.Do(ctx, args...).Result()
			if !refusedRESP(err) {
				got = fmt.Sprintf("%v %v", v, err)
			}
		case "grpc":
			cmd = "ShouldRateLimit " + key
			resp, err := r.gc.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "gw", HitsAddend: 1,
				Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: gentry, Value: fmt.Sprintf("i%d%s", it.n, gid)}}}}})
			if status.Code(err) != grpcNoPerm {
				got = fmt.Sprintf("%v %v", resp, err)
				if err == nil && resp.OverallCode == rlsv3.RateLimitResponse_OK {
					it.mu.Lock()
					k := it.log(key, false)
					k.Adm = append(k.Adm, Admission{Sent: sent, Recv: time.Now(), Cost: 1, By: "grpc", Door: "grpc"})
					it.mu.Unlock()
				}
			}
		}
	})
	w.count("rival")
	if got != "" && w.unknownOutcome(p, began, time.Now(), errors.New(got)) {
		it.logf(t, "%5d rival %s %s -> unknown outcome (%s being killed): %s", it.ms(time.Now()), p.name, cmd, p.name, got)
		return
	}
	if got != "" {
		it.permission(t, key, cmd, got)
	} else {
		w.mu.Lock()
		w.stats.refused++
		w.mu.Unlock()
	}
	it.logf(t, "%5d rival %s %s -> refused %v", it.ms(time.Now()), p.name, cmd, got == "")
}

// httpRefused reports whether err is the HTTP door's refusal for want of
// a permission.
func httpRefused(err error) bool {
	var he *httpError
	return errors.As(err, &he) && he.status == httpNoPerm
}

// someReceipt is a receipt the rival may try on key: one of the owner's
// (of this key or another), or a forged one.
func (it *iteration) someReceipt(t *rapid.T, key string) string {
	it.mu.Lock()
	var rs []string
	for _, r := range it.receipts {
		if r.user == "owner" {
			rs = append(rs, r.id)
		}
	}
	it.mu.Unlock()
	if len(rs) == 0 || rapid.IntRange(0, 3).Draw(t, "receipt.forged") == 0 {
		return forged()
	}
	return rs[rapid.IntRange(0, len(rs)-1).Draw(t, "receipt.owner")]
}

// ownerToken is a slot token of the owner's the rival may try: one it
// holds, or a guessed one.
func (it *iteration) ownerToken() string {
	it.mu.Lock()
	defer it.mu.Unlock()
	for i := len(it.slots) - 1; i >= 0; i-- {
		if s := it.slots[i]; !s.released && s.user == "owner" {
			return s.token
		}
	}
	return forged()
}

// receipt is one receipt a take was answered with (RL.TAKE key cost
// RECEIPT), and by whom.
type receipt struct {
	user, key, id string
	cost          int64
	used          bool // an applied give-back named it
}

// takeReceipt sends RL.TAKE key cost RECEIPT and returns the six fields
// and the receipt (empty when refused).
func (p *tenant) takeReceipt(ctx context.Context, key string, cost int64) (reply, string, error) {
	return parseSeven(p.rc.Do(ctx, "RL.TAKE", key, cost, "RECEIPT").Slice())
}

// httpTakeReceipt posts {"key", "cost", "receipt": true} to /v1/take and
// returns the six fields and the receipt.
func (p *tenant) httpTakeReceipt(ctx context.Context, key string, cost int64) (reply, string, error) {
	var j struct {
		Allowed          bool
		Limit, Remaining int64
		Retry            int64  `json:"retry_after_ms"`
		Reset            int64  `json:"reset_after_ms"`
		DecidedBy        string `json:"decided_by"`
		Receipt          *string
	}
	if err := p.post(ctx, "/v1/take", map[string]any{"key": key, "cost": cost, "receipt": true}, &j); err != nil {
		return reply{}, "", err
	}
	if j.Receipt == nil {
		return reply{}, "", fmt.Errorf("/v1/take with a receipt asked: no receipt field")
	}
	r := reply{Limit: j.Limit, Remaining: j.Remaining, RetryAfter: j.Retry, ResetAfter: j.Reset, DecidedBy: j.DecidedBy}
	if j.Allowed {
		r.Allowed = 1
	}
	return r, *j.Receipt, nil
}

// takeWithReceipt is the "take-receipt" action and the rival's takes of
// its own keys: RL.TAKE key cost RECEIPT by tn through RESP or HTTP,
// booked as a take, its receipt kept. A refused take's receipt must be
// empty; an admitted one's may be (a take answered without the store has
// nothing to give back, which only under-admits).
func (it *iteration) takeWithReceipt(t *rapid.T, ctx context.Context, p *proc, tn *tenant, key string, cost int64) {
	door := rapid.SampledFrom([]string{"resp", "resp", "http"}).Draw(t, "receipt.door")
	sent := time.Now()
	var r reply
	var id string
	var err error
	if door == "http" {
		r, id, err = tn.httpTakeReceipt(ctx, key, cost)
	} else {
		r, id, err = tn.takeReceipt(ctx, key, cost)
	}
	recv := time.Now()
	if err != nil {
		it.opError(t, p, sent, recv, err, "RL.TAKE %q %d RECEIPT by %s (%s)", key, cost, tn.role, door)
		return
	}
	if e := shapeError(r, cost); e != "" || r.Allowed == 0 && id != "" {
		t.Logf("take-receipt %s %q %d -> %v %q", p.name, key, cost, r, id)
		t.Fatalf("reply shape (RL.TAKE RECEIPT, %s): %s, receipt %q", door, e, id)
	}
	it.record(door, key, p.name, cost, sent, recv, r, true)
	if id != "" && r.Allowed == 1 {
		it.mu.Lock()
		it.receipts = append(it.receipts, &receipt{user: tn.role, key: key, id: id, cost: cost})
		k := it.log(key, false)
		if k.Receipts == nil {
			k.Receipts = map[string]Taken{}
		}
		k.Receipts[id] = Taken{cost, tn.role, tn.sluiceUser()}
		it.mu.Unlock()
	}
	it.w.count("take-receipt")
	it.logf(t, "%5d take-receipt %s %s %s %q %d -> %v %q", it.ms(recv), tn.role, p.name, door, key, cost, r, id)
}

// giveBack sends RL.ADJUST key -delta [receipt] by tn (through RESP or
// HTTP) and books it in the key's Backs, applied or not: Check credits
// the valid ones and flags an applied invalid one (a valid one may still
// be refused: its policy changed, its window closed). rc, when not nil,
// is the receipt named, marked used once applied.
func (it *iteration) giveBack(t *rapid.T, ctx context.Context, p *proc, tn *tenant, door, key string, delta int64, rc *receipt, id, mode string) {
	sent := time.Now()
	var r reply
	var err error
	if door == "http" {
		body := map[string]any{"key": key, "delta": -delta}
		if id != "" {
			body["receipt"] = id
		}
		r, err = tn.httpAdjust(ctx, body)
	} else {
		args := []any{"RL.ADJUST", key, -delta}
		if id != "" {
			args = append(args, id)
		}
		var v any
		if v, err = tn.rc.Do(ctx, args...).Result(); err == nil {
			r, err = parseReply(v)
		}
	}
	recv := time.Now()
	applied := err == nil
	var he *httpError
	switch {
	case err == nil:
	case unavailable(err) || it.w.unknownOutcome(p, sent, recv, err):
		// the store did not answer in time (or p was being killed): the give-back may or may
		// not have been applied, so the key is inconclusive
		it.mu.Lock()
		k := it.log(key, false)
		k.Fallback = append(k.Fallback, "adjust-unavailable")
		it.mu.Unlock()
		it.logf(t, "%5d give-back %s %s %s %q %d %q -> %v", it.ms(recv), tn.role, p.name, door, key, -delta, id, err)
		return
	case errors.As(err, &he) && he.status/100 == 4, strings.HasPrefix(err.Error(), "ERR"):
		// refused: changes nothing, which the bound checks
	case strings.Contains(err.Error(), "scope: global"):
	default:
		t.Fatalf("RL.ADJUST %q %d %q by %s on %s (%s): %v", key, -delta, id, tn.role, p.name, door, err)
	}
	it.mu.Lock()
	k := it.log(key, false)
	switch {
	case applied && (strings.HasPrefix(r.DecidedBy, "fallback-") || strings.HasPrefix(r.DecidedBy, "overload-")):
		k.Fallback = append(k.Fallback, r.DecidedBy)
	case applied && r.DecidedBy == "shadow":
	default:
		k.Backs = append(k.Backs, GiveBack{Sent: sent, Recv: recv, Delta: delta, Receipt: id, Applied: applied, By: r.DecidedBy, Who: tn.role, User: tn.sluiceUser()})
	}
	if applied && rc != nil {
		rc.used = true
	}
	it.mu.Unlock()
	it.w.count("give-back")
	if rc != nil && delta > rc.cost {
		mode += "+1"
	}
	it.w.mu.Lock()
	if it.w.stats.backs == nil {
		it.w.stats.backs = map[string]*[2]int{}
	}
	if it.w.stats.backs[mode] == nil {
		it.w.stats.backs[mode] = &[2]int{}
	}
	if applied {
		it.w.stats.backs[mode][0]++
	} else {
		it.w.stats.backs[mode][1]++
		if mode == "valid" { // why the contract's valid ones were refused
			if it.w.stats.validRefused == nil {
				it.w.stats.validRefused = map[string]int{}
			}
			it.w.stats.validRefused[err.Error()]++
		}
	}
	it.w.mu.Unlock()
	it.logf(t, "%5d give-back %s %s %s %q %d %q -> %v %v", it.ms(recv), tn.role, p.name, door, key, -delta, id, r, err)
}

// pickReceipt draws the receipt a give-back of tn's names and the key it
// names it on: a valid one (tn's, unused, on its own key), a reused one,
// one of tn's other keys', the other tenant's, a forged one or none, and
// which (valid, reused, other-key, other-user, forged, none; a mode with
// no receipt to draw from is forged). It returns nil and "" for none.
func (it *iteration) pickReceipt(t *rapid.T, tn *tenant, key string) (string, *receipt, string, string) {
	mode := rapid.SampledFrom([]string{"valid", "valid", "reused", "other-key", "other-user", "forged", "none"}).Draw(t, "receipt.mode")
	it.mu.Lock()
	var pool []*receipt
	for _, r := range it.receipts {
		mine := r.user == tn.role
		switch mode {
		case "valid":
			if mine && !r.used {
				pool = append(pool, r)
			}
		case "reused":
			if mine && r.used {
				pool = append(pool, r)
			}
		case "other-key":
			if mine && r.key != key {
				pool = append(pool, r)
			}
		case "other-user":
			if !mine {
				pool = append(pool, r)
			}
		}
	}
	it.mu.Unlock()
	switch {
	case mode == "none":
		return key, nil, "", mode
	case mode == "forged" || len(pool) == 0:
		return key, nil, forged(), "forged"
	}
	r := pool[rapid.IntRange(0, len(pool)-1).Draw(t, "receipt.which")]
	if mode == "valid" || mode == "reused" || mode == "other-user" && tn.role == "owner" && rapid.Bool().Draw(t, "receipt.own.key") {
		key = r.key // on its own key; the rival's, by the owner, who may adjust every key: only the receipt's user stops it
	}
	return key, r, r.id, mode
}

// rivalOwn is the "rival-own" action: the rival on its own keys, where it
// may take, give back with receipts (its own, reused, of its other key,
// the owner's, forged, none), hold and release slots (with its tokens,
// guessed ones and the owner's), and send an RL.MTAKE across the two
// tenants, which is refused whole and spends nothing of its own key.
func (it *iteration) rivalOwn(t *rapid.T, ctx context.Context) {
	_, p := it.w.pick(t)
	r := p.rival
	key := fmt.Sprintf("ev.i%d.%s", it.n, rapid.SampledFrom([]string{"a", "b"}).Draw(t, "ev.id"))
	switch rapid.SampledFrom([]string{"take", "take", "give-back", "give-back", "mtake", "acquire", "release"}).Draw(t, "ev.cmd") {
	case "take":
		it.takeWithReceipt(t, ctx, p, r, key, drawCost(t, "ev.cost"))
	case "give-back":
		if rapid.Bool().Draw(t, "ev.take.first") {
			it.takeWithReceipt(t, ctx, p, r, key, drawCost(t, "ev.cost"))
		}
		k, rc, id, mode := it.pickReceipt(t, r, key)
		delta := drawDelta(t, rc)
		it.giveBack(t, ctx, p, r, rapid.SampledFrom([]string{"resp", "http"}).Draw(t, "ev.door"), k, delta, rc, id, mode)
	case "mtake":
		other := it.drawKey(t, "ev.other")
		cmd := fmt.Sprintf("RL.MTAKE %s 1 %s 1", key, other)
		var v any
		var err error
		sent := time.Now()
		it.unspent(t, ctx, p, r, key, cmd, func() {
			it.unspent(t, ctx, p, p.tenant, other, cmd, func() {
				v, err = r.rc.Do(ctx, "RL.MTAKE", key, 1, other, 1).Result()
			})
		})
		if err != nil && it.w.unknownOutcome(p, sent, time.Now(), err) {
			return
		}
		if !refusedRESP(err) {
			it.permission(t, other, cmd, fmt.Sprintf("%v %v", v, err))
		}
		it.w.count("rival-mtake")
		it.logf(t, "%5d rival-mtake %s %s -> %v", it.ms(time.Now()), p.name, cmd, err)
	case "acquire":
		ck := fmt.Sprintf("ev.cc.i%d.a", it.n)
		sent := time.Now()
		rp, tok, err := r.acquire(ctx, "resp", ck, 0)
		recv := time.Now()
		if err != nil {
			it.opError(t, p, sent, recv, err, "RL.ACQUIRE %q by rival", ck)
			return
		}
		if rp.Allowed == 1 {
			it.mu.Lock()
			it.slots = append(it.slots, &slot{key: ck, token: tok, user: "rival", hold: Hold{SentA: sent, RecvA: recv, TTL: time.Second}})
			it.mu.Unlock()
		}
		it.w.count("rival-acquire")
		it.logf(t, "%5d rival-acquire %s %q -> %v", it.ms(recv), p.name, ck, rp)
	case "release":
		ck := fmt.Sprintf("ev.cc.i%d.a", it.n)
		tok, whose := forged(), "guessed"
		if rapid.Bool().Draw(t, "ev.release.owner") {
			tok, whose = it.ownerToken(), "the owner's"
		}
		sent := time.Now()
		held, err := r.release(ctx, "resp", ck, tok)
		if err != nil && !unavailable(err) || held {
			if err != nil && it.w.unknownOutcome(p, sent, time.Now(), err) {
				break
			}
			it.violation(t, "rival release check", fmt.Sprintf("RL.RELEASE %q with %s token by the rival answered %v %v, want 0", ck, whose, held, err))
		}
		it.w.count("rival-release")
		it.logf(t, "%5d rival-release %s %q %s -> %v %v", it.ms(time.Now()), p.name, ck, whose, held, err)
	}
}

// adjustReceipt is the owner's give-back: one of pickReceipt's, through
// RESP or HTTP.
func (it *iteration) adjustReceipt(t *rapid.T, ctx context.Context) {
	_, p := it.w.pick(t)
	key := it.drawKey(t, "key")
	if rapid.Bool().Draw(t, "take.first") { // a take with a receipt first, as a client that corrects it would
		it.takeWithReceipt(t, ctx, p, p.tenant, key, drawCost(t, "cost"))
	}
	key, rc, id, mode := it.pickReceipt(t, p.tenant, key)
	delta := drawDelta(t, rc)
	it.giveBack(t, ctx, p, p.tenant, rapid.SampledFrom([]string{"resp", "http"}).Draw(t, "door"), key, delta, rc, id, mode)
}

// httpAdjust posts body to /v1/adjust and returns the six fields.
func (p *tenant) httpAdjust(ctx context.Context, body map[string]any) (reply, error) {
	var j struct {
		Allowed          bool
		Limit, Remaining int64
		Retry            int64  `json:"retry_after_ms"`
		Reset            int64  `json:"reset_after_ms"`
		DecidedBy        string `json:"decided_by"`
	}
	if err := p.post(ctx, "/v1/adjust", body, &j); err != nil {
		return reply{}, err
	}
	r := reply{Limit: j.Limit, Remaining: j.Remaining, RetryAfter: j.Retry, ResetAfter: j.Reset, DecidedBy: j.DecidedBy}
	if j.Allowed {
		r.Allowed = 1
	}
	return r, nil
}

// drawDelta is the tokens a give-back naming rc asks back: up to its
// take's cost, now and then one more (which must be refused); 1 to 3
// without one.
func drawDelta(t *rapid.T, rc *receipt) int64 {
	if rc == nil {
		return int64(rapid.IntRange(1, 3).Draw(t, "delta"))
	}
	if rapid.IntRange(0, 5).Draw(t, "delta.over") == 0 {
		return rc.cost + 1
	}
	return int64(rapid.IntRange(1, int(rc.cost)).Draw(t, "delta"))
}
