package server

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-rl/sluice/limit"
	"github.com/sluice-rl/sluice/limiter"
	"github.com/sluice-rl/sluice/local"
)

// RL.ADJUST on the wire, against a real limiter and the in-process store on a clock that stands still:
// the reply's six fields, debt, the cap, delta 0, and argument errors.
func TestAdjustCommand(t *testing.T) {
	t.Parallel()
	bucket := &limit.Policy{Name: "llm", Match: "llm:*", Limit: 100, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed}
	global := &limit.Policy{Name: "world", Match: "world:*", Limit: 100, Rate: 1, Period: time.Hour, OnStoreError: limit.FailClosed, Scope: limit.ScopeGlobal}
	lim, err := limiter.New(limiter.Config{
		Policies: limiter.MatcherFunc(func(key string) *limit.Policy {
			switch key[0] {
			case 'l':
				return bucket
			case 'w':
				return global
			}
			return nil
		}),
		Store: local.New(local.Config{DecidedBy: limit.ByEmbedded, Now: func() time.Time { return time.Unix(1_700_000_000, 0) }}),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := start(t, Config{Decider: lim})
	rc := dialRaw(t, addr)
	// {r} is the receipt of the first take, {s} of the second.
	receipts := map[string]string{}
	for _, tc := range []struct{ in, want string }{
		{"RL.TAKE llm:a 30 RECEIPT", "[:1 :100 :70 :-1 :108000000 $embedded ${r}]"},
		// the response used 130: 100 more than the estimate; 30 in debt
		{"RL.ADJUST llm:a 100", "[:1 :100 :0 :-1 :468000000 $embedded]"},
		{"RL.TAKE llm:a 1", "[:0 :100 :0 :111600000 :468000000 $embedded]"},
		{"RL.TAKE llm:a 1 receipt", "[:0 :100 :0 :111600000 :468000000 $embedded $]"},
		{"RL.ADJUST llm:a 0", "[:1 :100 :0 :-1 :468000000 $embedded]"},
		// it used 40 less than it said: the debt is paid, 10 left; a
		// give-back names the take it undoes
		{"RL.ADJUST llm:a -20", "-ERR a negative delta gives back a take: name its receipt (RL.TAKE key cost RECEIPT, then RL.ADJUST key delta receipt)"},
		{"RL.ADJUST llm:a -31 {r}", "-ERR delta exceeds the cost of the receipt's take"},
		{"RL.ADJUST llm:a -20 {r}", "[:1 :100 :0 :-1 :396000000 $embedded]"},
		{"RL.ADJUST llm:a -20 {r}", "-ERR invalid, expired or already used receipt"},
		{"RL.ADJUST llm:b -1 {r}", "-ERR invalid, expired or already used receipt"},
		{"RL.ADJUST llm:a -1 0123456789abcdef0123456789abcdef", "-ERR invalid, expired or already used receipt"},
		{"RL.ADJUST llm:a -1 x", "-ERR invalid, expired or already used receipt"},
		{"RL.TAKE llm:b 50 RECEIPT", "[:1 :100 :50 :-1 :180000000 $embedded ${s}]"},
		{"RL.ADJUST llm:b -9007199254740991 {s}", "-ERR delta exceeds the cost of the receipt's take"},
		{"RL.ADJUST llm:b -50 {s}", "[:1 :100 :100 :-1 :0 $embedded]"},
		{"RL.ADJUST llm:a", "-ERR wrong number of arguments for 'rl.adjust' command"},
		{"RL.ADJUST llm:a 1 2 3", "-ERR wrong number of arguments for 'rl.adjust' command"},
		{"RL.TAKE llm:a 1 RECEIPT x", "-ERR wrong number of arguments for 'rl.take' command"},
		{"RL.TAKE llm:a 1 2", "-ERR syntax error"},
		{"RL.PEEK llm:a 1 RECEIPT", "-ERR wrong number of arguments for 'rl.peek' command"},
		{"RL.ADJUST llm:a 1.5", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST llm:a -0", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST llm:a +3", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST llm:a 007", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST llm:a 9007199254740992", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST llm:a -99999999999999999999", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST \"\" 1", "-ERR key must not be empty"},
		{"RL.ADJUST x 1", "-ERR no policy matches key 'x'"},
		{"COMMAND INFO rl.adjust", "[[$rl.adjust :-3 [+write +fast] :1 :1 :1 [+@adjust] [] [] []]]"},
		{"RL.ADJUST world:a -1", "-ERR RL.ADJUST is not supported for policy 'world': scope: global budgets are spent through region pools; adjust is regional only"},
	} {
		in, want := tc.in, tc.want
		for name, r := range receipts {
			in, want = strings.ReplaceAll(in, "{"+name+"}", r), strings.ReplaceAll(want, "{"+name+"}", r)
		}
		rc.send(in + "\r\n")
		got := rc.readReply()
		if i := strings.Index(want, "${"); i >= 0 && strings.HasPrefix(got, want[:i+1]) && len(got) == i+1+2*limit.ReceiptBytes+1 {
			receipts[want[i+2:i+3]] = got[i+1 : len(got)-1]
			want = got
		}
		if got != want {
			t.Errorf("%s:\n got %q\nwant %q", in, got, want)
		}
	}
	rc.send("COMMAND DOCS rl.adjust\r\n")
	if got := rc.readReply(); !strings.Contains(got, "$delta") || !strings.Contains(got, "$Corrects what was spent") || !strings.Contains(got, "$rate-limiting") {
		t.Errorf("COMMAND DOCS rl.adjust: %s", got)
	}
	if s := lim.Snapshot(); s.Adjusts != 4 || s.AdjustSpent != 100 || s.AdjustReturned != 20+50 || s.Decisions != 4 {
		t.Errorf("counters: %d adjusts, %d spent, %d returned, %d decisions; want 4, 100, 70, 4", s.Adjusts, s.AdjustSpent, s.AdjustReturned, s.Decisions)
	}
}
