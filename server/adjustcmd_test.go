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
	for _, tc := range []struct{ in, want string }{
		{"RL.TAKE llm:a 30", "[:1 :100 :70 :-1 :108000000 $embedded]"},
		// the response used 130: 100 more than the estimate; 30 in debt
		{"RL.ADJUST llm:a 100", "[:1 :100 :0 :-1 :468000000 $embedded]"},
		{"RL.TAKE llm:a 1", "[:0 :100 :0 :111600000 :468000000 $embedded]"},
		{"RL.ADJUST llm:a 0", "[:1 :100 :0 :-1 :468000000 $embedded]"},
		// it used 40 less than it said: the debt is paid, 10 left
		{"RL.ADJUST llm:a -40", "[:1 :100 :10 :-1 :324000000 $embedded]"},
		{"RL.ADJUST llm:a -9007199254740991", "[:1 :100 :100 :-1 :0 $embedded]"},
		{"RL.ADJUST llm:a", "-ERR wrong number of arguments for 'rl.adjust' command"},
		{"RL.ADJUST llm:a 1 2", "-ERR wrong number of arguments for 'rl.adjust' command"},
		{"RL.ADJUST llm:a 1.5", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST llm:a -0", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST llm:a +3", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST llm:a 007", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST llm:a 9007199254740992", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST llm:a -99999999999999999999", "-ERR delta must be an integer between -9007199254740991 and 9007199254740991"},
		{"RL.ADJUST \"\" 1", "-ERR key must not be empty"},
		{"RL.ADJUST x 1", "-ERR no policy matches key 'x'"},
		{"COMMAND INFO rl.adjust", "[[$rl.adjust :3 [+write +fast] :1 :1 :1 [+@adjust] [] [] []]]"},
		{"RL.ADJUST world:a -1", "-ERR RL.ADJUST is not supported for policy 'world': scope: global budgets are spent through region pools; adjust is regional only"},
	} {
		rc.send(tc.in + "\r\n")
		if got := rc.readReply(); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
	rc.send("COMMAND DOCS rl.adjust\r\n")
	if got := rc.readReply(); !strings.Contains(got, "$delta") || !strings.Contains(got, "$Corrects what was spent") || !strings.Contains(got, "$rate-limiting") {
		t.Errorf("COMMAND DOCS rl.adjust: %s", got)
	}
	if s := lim.Snapshot(); s.Adjusts != 4 || s.AdjustSpent != 100 || s.AdjustReturned != 40+9007199254740991 || s.Decisions != 2 {
		t.Errorf("counters: %d adjusts, %d spent, %d returned, %d decisions; want 4, 100, 40+2^53-1, 2", s.Adjusts, s.AdjustSpent, s.AdjustReturned, s.Decisions)
	}
}
