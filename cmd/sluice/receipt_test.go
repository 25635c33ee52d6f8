package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/sluice-rl/sluice/internal/localredis"
	"github.com/sluice-rl/sluice/internal/redistest"
)

// receiptConfig: 100 tokens at 1 an hour, so that nothing refills while a
// test runs, and no hot-key path (every take is the store's).
const receiptConfig = `defaults:
  on_store_error: closed
policies:
  - {name: llm, match: "llm:*", limit: 100, rate: 1, period: 1h, hot: {mode: off}}
  - {name: loop, match: "loop:*", limit: 10, rate: 1, period: 1h, hot: {mode: off}}
`

// receiptModes are the two stores the give-back rule is checked on: a real
// Redis Cluster behind the binary, and the embedded store.
func receiptModes(t *testing.T) map[string][]string {
	t.Helper()
	c := redistest.NewCluster(t, localredis.Config{})
	return map[string][]string{
		"cluster":  {"--cluster", strings.Join(c.Addrs(), ",")},
		"embedded": nil,
	}
}

// countAdmitted sends n RL.TAKE key cost and counts the admitted.
func countAdmitted(t *testing.T, c *redis.Client, key string, cost int64, n int) int {
	t.Helper()
	admitted := 0
	for range n {
		if mustTake(t, c, key, cost).Allowed {
			admitted++
		}
	}
	return admitted
}

// TestGiveBackWithoutReceipt is issue 28's hostile tenant: with
// --admin-pass set (RL.RESET is refused to a plain client), a client that
// never spent on a key gives back to it, and a client that takes and gives
// back in turn admits past its limit. Neither may move the key's limit: a
// negative RL.ADJUST without the receipt of a take on the key is an error
// and changes nothing.
func TestGiveBackWithoutReceipt(t *testing.T) {
	t.Parallel()
	for mode, store := range receiptModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--config", writeConfig(t, receiptConfig), "--admin-pass", "adm-Rc93"}, store...)
			p := startSluice(t, args...)
			owner, hostile := p.client(t), p.client(t)

			if r := mustTake(t, owner, "llm:victim", 100); !r.Allowed {
				t.Fatalf("the owner's take of 100: %+v", r)
			}
			if r := mustTake(t, owner, "llm:victim", 1); r.Allowed {
				t.Fatalf("a take past the limit: %+v", r)
			}
			if err := hostile.Do(t.Context(), "RL.RESET", "llm:victim").Err(); err == nil {
				t.Fatal("RL.RESET by a plain client was admitted")
			}
			err := hostile.Do(t.Context(), "RL.ADJUST", "llm:victim", "-9007199254740991").Err()
			after := countAdmitted(t, owner, "llm:victim", 1, 3)
			t.Logf("%s: give-back by a client that never spent: err %v; then %d of 3 takes admitted", mode, err, after)
			if err == nil || after != 0 {
				t.Errorf("%s: a foreign give-back: err %v, then %d of 3 takes admitted; want an error and 0", mode, err, after)
			}

			admitted := 0
			for range 100 {
				if mustTake(t, hostile, "loop:k", 10).Allowed {
					admitted += 10
				}
				_ = hostile.Do(t.Context(), "RL.ADJUST", "loop:k", "-10").Err()
			}
			t.Logf("%s: 100 rounds of TAKE 10 / ADJUST -10 (no receipt) admitted %d on a limit of 10", mode, admitted)
			if admitted != 10 {
				t.Errorf("%s: 100 rounds of TAKE 10 / ADJUST -10 admitted %d, want 10", mode, admitted)
			}
		})
	}
}

// takeReceipt sends RL.TAKE key cost RECEIPT and parses its seven fields.
func takeReceipt(t *testing.T, c *redis.Client, key string, cost int64) (reply, string) {
	t.Helper()
	v, err := c.Do(t.Context(), "RL.TAKE", key, cost, "RECEIPT").Slice()
	if err != nil {
		t.Fatalf("RL.TAKE %s %d RECEIPT: %v", key, cost, err)
	}
	if len(v) != 7 {
		t.Fatalf("RL.TAKE %s %d RECEIPT: %d elements, want 7: %v", key, cost, len(v), v)
	}
	n := make([]int64, 5)
	for i := range n {
		n[i], _ = v[i].(int64)
	}
	by, _ := v[5].(string)
	rc, _ := v[6].(string)
	return reply{Allowed: n[0] == 1, Limit: n[1], Remaining: n[2], Retry: n[3], ResetMs: n[4], DecidedBy: by}, rc
}

// giveBack sends RL.ADJUST key delta receipt.
func giveBack(t *testing.T, c *redis.Client, key string, delta int64, receipt string) (reply, error) {
	t.Helper()
	v, err := c.Do(t.Context(), "RL.ADJUST", key, delta, receipt).Slice()
	if err != nil {
		return reply{}, err
	}
	if len(v) != 6 {
		t.Fatalf("RL.ADJUST %s %d %s: %v", key, delta, receipt, v)
	}
	n := make([]int64, 5)
	for i := range n {
		n[i], _ = v[i].(int64)
	}
	by, _ := v[5].(string)
	return reply{Allowed: n[0] == 1, Limit: n[1], Remaining: n[2], Retry: n[3], ResetMs: n[4], DecidedBy: by}, nil
}

// TestReceipts: on a real cluster and embedded, through go-redis, a
// receipt gives back at most its take's cost, once, on its own key; a
// forged, reused, foreign or oversized give-back is an error and changes
// nothing; 100 rounds of take and give-back with one receipt admit the
// limit and one give-back more, no further.
func TestReceipts(t *testing.T) {
	t.Parallel()
	const (
		invalid = "ERR invalid, expired or already used receipt"
		tooMuch = "ERR delta exceeds the cost of the receipt's take"
	)
	for mode, store := range receiptModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			p := startSluice(t, append([]string{"--config", writeConfig(t, receiptConfig)}, store...)...)
			owner, hostile := p.client(t), p.client(t)
			want := map[string]string{"cluster": "store", "embedded": "embedded"}[mode]

			r, ra := takeReceipt(t, owner, "llm:a", 30)
			if !r.Allowed || r.Remaining != 70 || r.DecidedBy != want || len(ra) != 32 {
				t.Fatalf("RL.TAKE llm:a 30 RECEIPT: %+v %q", r, ra)
			}
			_, rb := takeReceipt(t, owner, "llm:b", 5)
			checks := []struct {
				who     *redis.Client
				key     string
				delta   int64
				receipt string
				err     string
				left    int64
			}{
				{hostile, "llm:a", -1, rb, invalid, 70},                      // another key's
				{hostile, "llm:a", -1, strings.Repeat("0", 32), invalid, 70}, // forged
				{hostile, "llm:a", -1, "not-a-receipt", invalid, 70},         // not one at all
				{owner, "llm:a", -31, ra, tooMuch, 70},                       // more than the take
				{owner, "llm:a", -10, ra, "", 80},                            // 10 of its 30
				{owner, "llm:a", -10, ra, invalid, 80},                       // once
				{owner, "llm:b", 7, ra, "", 88},                              // a spend needs none
				{hostile, "llm:b", -5, rb, "", 93},                           // a receipt is a bearer's
				{owner, "llm:b", -9007199254740991, rb, invalid, 93},         // used
			}
			for _, c := range checks {
				got, err := giveBack(t, c.who, c.key, c.delta, c.receipt)
				switch {
				case c.err != "" && (err == nil || err.Error() != c.err):
					t.Errorf("RL.ADJUST %s %d %s: %+v, %v; want %q", c.key, c.delta, c.receipt, got, err, c.err)
				case c.err == "" && (err != nil || !got.Allowed || got.DecidedBy != want):
					t.Errorf("RL.ADJUST %s %d %s: %+v, %v; want recorded", c.key, c.delta, c.receipt, got, err)
				}
				if peek := peekOf(t, owner, c.key); peek != c.left {
					t.Errorf("after RL.ADJUST %s %d %s: %d left, want %d", c.key, c.delta, c.receipt, peek, c.left)
				}
			}

			// A refused take has nothing to give back: its receipt is empty.
			_, _ = takeReceipt(t, owner, "loop:full", 10)
			if r, rc := takeReceipt(t, owner, "loop:full", 1); r.Allowed || rc != "" {
				t.Errorf("a refused take: %+v, receipt %q; want refused, empty", r, rc)
			}
			// The option word is case-insensitive; with no cost, one.
			if v, err := owner.Do(t.Context(), "RL.TAKE", "llm:c", "receipt").Slice(); err != nil || len(v) != 7 || v[2] != int64(99) {
				t.Errorf("RL.TAKE llm:c receipt: %v %v", v, err)
			}
			if err := owner.Do(t.Context(), "RL.TAKE", "llm:c", 1, "RECEIPTS").Err(); err == nil || err.Error() != "ERR syntax error" {
				t.Errorf("RL.TAKE llm:c 1 RECEIPTS: %v", err)
			}

			// One receipt, used again and again: one give-back counts.
			admitted := 0
			_, rc := takeReceipt(t, hostile, "loop:r", 10)
			admitted += 10
			for range 99 {
				_, _ = giveBack(t, hostile, "loop:r", -10, rc)
				if mustTake(t, hostile, "loop:r", 10).Allowed {
					admitted += 10
				}
			}
			t.Logf("%s: one receipt given back 99 times between takes of 10: %d admitted on a limit of 10", mode, admitted)
			if admitted != 20 {
				t.Errorf("%s: one receipt reused: %d admitted, want 20 (the limit and one give-back)", mode, admitted)
			}
			// Each take's own receipt: every give-back counts, and the
			// bound is the limit plus the receipts given back.
			admitted, back := 0, 0
			for range 100 {
				r, rc := takeReceipt(t, hostile, "loop:each", 10)
				if r.Allowed {
					admitted += 10
				}
				if _, err := giveBack(t, hostile, "loop:each", -10, rc); err == nil {
					back += 10
				}
			}
			t.Logf("%s: 100 rounds of TAKE 10 RECEIPT / ADJUST -10 receipt: %d admitted, %d given back", mode, admitted, back)
			if admitted > 10+back || back != 1000 {
				t.Errorf("%s: %d admitted with %d given back by valid receipts, on a limit of 10", mode, admitted, back)
			}
		})
	}
}

// peekOf is the tokens RL.PEEK key 1 reports left.
func peekOf(t *testing.T, c *redis.Client, key string) int64 {
	t.Helper()
	r, err := takeOp(t.Context(), c, "RL.PEEK", key, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r.Remaining
}

// TestReceiptGoodOnceAcrossInstances: two sluice processes in front of one
// real Redis Cluster give back by the same receipts at once; each receipt
// gives back exactly once, whichever instance wins, with no secret shared
// between them.
func TestReceiptGoodOnceAcrossInstances(t *testing.T) {
	t.Parallel()
	c := redistest.NewCluster(t, localredis.Config{})
	args := []string{"--config", writeConfig(t, receiptConfig), "--cluster", strings.Join(c.Addrs(), ",")}
	a, b := startSluice(t, args...).client(t), startSluice(t, args...).client(t)
	const n = 50
	receipts := make([]string, n)
	for i := range receipts {
		var r reply
		if r, receipts[i] = takeReceipt(t, a, "llm:shared", 2); !r.Allowed || receipts[i] == "" {
			t.Fatalf("take %d: %+v", i, r)
		}
	}
	// A give-back is applied when answered allowed 1. One the store did
	// not answer in time (a loaded machine) is answered by on_store_error,
	// allowed 0, and may or may not have run: it is counted apart, and the
	// receipts it named may then be applied by the other instance.
	wins, unanswered := make(chan string, 2*n), make(chan string, 2*n)
	var wg sync.WaitGroup
	for _, cl := range []*redis.Client{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, rc := range receipts {
				r, err := adjust(cl, "llm:shared", -2, rc)
				switch {
				case err == nil && r.Allowed:
					wins <- rc
				case err == nil && strings.HasPrefix(r.DecidedBy, "fallback-"):
					unanswered <- rc
				case err == nil:
					t.Errorf("give-back answered %+v", r)
				case err.Error() != "ERR invalid, expired or already used receipt":
					t.Errorf("give-back: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	close(wins)
	close(unanswered)
	applied := map[string]int{}
	for rc := range wins {
		applied[rc]++
	}
	late := 0
	for range unanswered {
		late++
	}
	total := 0
	for rc, k := range applied {
		total += k
		if k > 1 {
			t.Errorf("receipt %s applied %d times", rc, k)
		}
	}
	left := peekOf(t, a, "llm:shared")
	t.Logf("%d receipts given back from two instances at once: %d give-backs applied, %d answered by on_store_error, %d tokens left of 100", n, total, late, left)
	if total+late < n || total > n || left != 100 {
		t.Errorf("%d receipts raced from two instances: %d applied (+%d unanswered), %d left; want %d and 100", n, total, late, left, n)
	}
}

// adjust sends RL.ADJUST key delta receipt and reads its six fields.
func adjust(c *redis.Client, key string, delta int64, receipt string) (reply, error) {
	v, err := c.Do(context.Background(), "RL.ADJUST", key, delta, receipt).Slice()
	if err != nil {
		return reply{}, err
	}
	if len(v) != 6 {
		return reply{}, fmt.Errorf("reply has %d elements, want 6: %v", len(v), v)
	}
	allowed, _ := v[0].(int64)
	by, _ := v[5].(string)
	return reply{Allowed: allowed == 1, DecidedBy: by}, nil
}

// TestReceiptIsItsUsers: two tenants whose users may both take and adjust
// a shared key. A receipt of one, given back by the other (who learnt it
// somehow: a log, a shared queue), is an unknown receipt and changes
// nothing; given back by its own user it is good. No client gives back what
// another spent (DESIGN, rule 4), whatever keys their users share.
func TestReceiptIsItsUsers(t *testing.T) {
	t.Parallel()
	users := writeACL(t, `user default off
user acme on >acme-Rc71 ~llm:* +@limit +@adjust
user beta on >beta-Rc72 ~llm:* +@limit +@adjust
`)
	for mode, store := range receiptModes(t) {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			p, httpAddr := startWithHTTP(t, append([]string{"--config", writeConfig(t, receiptConfig), "--aclfile", users}, store...)...)
			acme := userClient(t, p.Addr, "acme", "acme-Rc71")
			beta := userClient(t, p.Addr, "beta", "beta-Rc72")

			r, receipt := takeReceipt(t, acme, "llm:shared", 40)
			if !r.Allowed || receipt == "" {
				t.Fatalf("acme's take of 40 with a receipt: %+v %q", r, receipt)
			}
			_, err := giveBack(t, beta, "llm:shared", -40, receipt)
			left := remaining(t, acme, "RL.PEEK", "llm:shared")
			t.Logf("%s: beta gives back acme's receipt: err %v; %d left of 100", mode, err, left)
			if err == nil || !strings.Contains(err.Error(), "invalid, expired or already used receipt") || left != 60 {
				t.Fatalf("%s: beta gave back acme's take: err %v, %d left; want the unknown-receipt error and 60 left", mode, err, left)
			}
			g, err := giveBack(t, acme, "llm:shared", -40, receipt)
			if err != nil || !g.Allowed || g.Remaining != 100 {
				t.Fatalf("%s: acme gives back its own receipt after beta's try: %+v %v, want applied, 100 left", mode, g, err)
			}

			// The same across doors: a take over HTTP, beta's give-back of
			// it over HTTP and RESP refused, acme's over RESP applied.
			status, body := postAs(t, httpAddr, "/v1/take", "acme", "acme-Rc71", `{"key": "llm:door", "cost": 30, "receipt": true}`)
			hr, _ := body["receipt"].(string)
			if status != http.StatusOK || body["allowed"] != true || hr == "" {
				t.Fatalf("%s: acme's HTTP take with a receipt: %d %v", mode, status, body)
			}
			status, body = postAs(t, httpAddr, "/v1/adjust", "beta", "beta-Rc72", `{"key": "llm:door", "delta": -30, "receipt": "`+hr+`"}`)
			if status != http.StatusConflict {
				t.Fatalf("%s: beta's HTTP give-back of acme's receipt: %d %v, want 409", mode, status, body)
			}
			if _, err := giveBack(t, beta, "llm:door", -30, hr); err == nil {
				t.Fatalf("%s: beta gave back acme's HTTP take over RESP", mode)
			}
			if g, err := giveBack(t, acme, "llm:door", -30, hr); err != nil || g.Remaining != 100 {
				t.Fatalf("%s: acme's RESP give-back of its HTTP take: %+v %v, want 100 left", mode, g, err)
			}
		})
	}
}

// postAs posts body to the HTTP door at path as user (Basic credentials)
// and returns the status and the decoded JSON object.
func postAs(t *testing.T, addr, path, user, pass, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, pass)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("POST %s: %d, body: %v", path, resp.StatusCode, err)
	}
	return resp.StatusCode, m
}
