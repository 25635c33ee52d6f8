package server

import (
	"strings"
	"testing"
)

// The wire shapes of RL.MTAKE and CL.THROTTLE, and their argument errors.
func TestMultiCommands(t *testing.T) {
	t.Parallel()
	fake := newFake(5)
	_, addr := start(t, Config{Decider: fake})
	rc := dialRaw(t, addr)
	for _, tc := range []struct{ in, want string }{
		{"RL.MTAKE a 2 b 3", "[:1 [[:1 :5 :3 :-1 :2000 $store] [:1 :5 :2 :-1 :3000 $store]]]"},
		// b has 2 left: refused, and a keeps its 3 (the fake's reset is used × 1000)
		{"RL.MTAKE a 1 b 3", "[:0 [[:1 :5 :3 :-1 :2000 $store] [:0 :5 :2 :1000 :3000 $store]]]"},
		{"RL.PEEK a", "[:1 :5 :3 :-1 :2000 $store]"},
		{"RL.MTAKE a", "-ERR wrong number of arguments for 'rl.mtake' command"},
		{"RL.MTAKE a 1 b", "-ERR wrong number of arguments for 'rl.mtake' command"},
		{"RL.MTAKE a 0", "-ERR cost must be a positive integer"},
		{"RL.MTAKE a 1 nopolicy:x 1", "-ERR no policy matches key 'nopolicy:x'"},
		{"RL.MTAKE " + strings.Repeat("k 1 ", MaxMTakeKeys+1), "-ERR wrong number of arguments for 'rl.mtake' command"},
		// the fake's bucket is 5 whatever the policy; the shape is the point
		{"CL.THROTTLE u 4 30 60", "[:0 :5 :4 :-1 :1]"},
		{"CL.THROTTLE u 4 30 60 5", "[:1 :5 :4 :1 :1]"},
		{"CL.THROTTLE v 15 30 60 0", "[:0 :5 :5 :-1 :0]"},
		{"CL.THROTTLE u 1 1", "-ERR wrong number of arguments for 'cl.throttle' command"},
		{"CL.THROTTLE u -1 1 1", "-ERR max_burst must be a non-negative integer"},
		{"CL.THROTTLE u 1 0 1", "-ERR count must be a positive integer"},
		{"CL.THROTTLE u 1 1 1.5", "-ERR period must be a positive integer (seconds)"},
		{"CL.THROTTLE u 1 1 1 x", "-ERR quantity must be a non-negative integer"},
		{"CL.THROTTLE u 5000 1 1", "-ERR invalid CL.THROTTLE arguments: max_burst too large for the fake"},
	} {
		rc.send(tc.in + "\r\n")
		if got := rc.readReply(); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
