package cluster

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

func TestKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ user, want string }{
		// The layout of keys without '}' and of well-formed tags is fixed:
		// state written by earlier versions stays where it is.
		{"acme", "sluice:{acme}"},
		{"{acme}:login", "sluice:{acme}:login"},
		{"login:{acme}", "sluice:login:{acme}"},
		{"}{acme}", "sluice:}{acme}"}, // the first '{' opens the tag; a '}' before it does not matter
		{"{{a}}", "sluice:{{a}}}"},    // tag "{a", kept; one '}' more: "sluice:{{a}}" is "{{a}"'s
		{"{{a}", "sluice:{{a}}"},      // only a tag: one '}' more, since "sluice:{{a}" is "{a"'s
		// A key that is only a tag would be the key without braces: it
		// gets one '}' more, and so does every key of that shape.
		{"{acme}", "sluice:{acme}}"},
		{"{acme}}", "sluice:{acme}}}"},
		{"{a{b}", "sluice:{a{b}}"},
		{"a{b", "sluice:{a{b}"},
		{"{a", "sluice:{{a}"},
		{"", "sluice:{}"},
		// A '}' with no well-formed tag in front of it: the Redis key opens
		// with the empty tag "{}", so Redis hashes all of it.
		{"tenant}1", "sluice:{}tenant}1"},
		{"a{}b", "sluice:{}a{}b"},
		{"{}", "sluice:{}{}"},
		{"}", "sluice:{}}"},
		{"a{}b{c}", "sluice:{}a{}b{c}"}, // Redis reads the first tag only: empty
	}
	for _, tt := range tests {
		if got := Key(tt.user); got != tt.want {
			t.Errorf("Key(%q) = %q, want %q", tt.user, got, tt.want)
		}
	}
}

// hashed is the part of a Redis key that Redis Cluster hashes: its hash tag
// by the first '{' and the first '}' after it, or all of it.
func hashed(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// checkKey states the layout's promises for one user key: a well-formed
// user tag is kept, and any other key is hashed on something that names it
// alone (itself, or its whole Redis key), so distinct keys never share a
// hash input by accident.
func checkKey(t *testing.T, user string) {
	t.Helper()
	k := Key(user)
	if !strings.HasPrefix(k, Prefix) {
		t.Fatalf("Key(%q) = %q: no prefix", user, k)
	}
	if tag := hashed(user); tag != user {
		if got := hashed(k); got != tag {
			t.Fatalf("Key(%q) = %q hashes on %q; the user's tag is %q", user, k, got, tag)
		}
		return
	}
	if got := hashed(k); got != user && got != k {
		t.Fatalf("Key(%q) = %q hashes on %q: neither the user key nor the whole Redis key", user, k, got)
	}
}

// Keys without a well-formed tag must not collapse onto one slot:
// tenant}1, tenant}2, … are as many buckets on as many hash inputs.
func TestKeyNoSharedTagWithoutBraces(t *testing.T) {
	t.Parallel()
	for _, shape := range []string{"tenant}%d", "a{}b%d", "}%d", "x{}}%d", "%d}", "{}%d"} {
		inputs := map[string]bool{}
		slots := map[int]bool{}
		for i := range 200 {
			user := strings.Replace(shape, "%d", strconv.Itoa(i), 1)
			inputs[hashed(Key(user))] = true
			slots[Slot(Key(user))] = true
		}
		if len(inputs) != 200 || len(slots) < 150 {
			t.Errorf("%s: 200 keys hash on %d distinct inputs, %d slots", shape, len(inputs), len(slots))
		}
	}
}

// FuzzKey: the layout's promises for any key, and no two keys of any two
// spaces on one Redis key: SpaceKey has a left inverse, so it is
// injective.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"acme", "{acme}:x", "tenant}1", "a{}b", "{}", "}{a}", "{{a}}", "a{b", "", "{", "}", "{acme}", "{a{b}"} {
		f.Add(s, s+"}", uint8(0), uint8(1))
		f.Add(s, "{"+s+"}", uint8(0), uint8(0))
	}
	f.Fuzz(func(t *testing.T, a, b string, sa, sb uint8) {
		checkKey(t, a)
		checkKey(t, b)
		spa, spb := limit.Space(sa%6), limit.Space(sb%6)
		ka, kb := SpaceKey(spa, a), SpaceKey(spb, b)
		if got, user, ok := unKey(ka); !ok || got != spa || user != a {
			t.Fatalf("SpaceKey(%v, %q) = %q reads back as %v %q %v", spa, a, ka, got, user, ok)
		}
		if (a != b || spa != spb) && ka == kb {
			t.Fatalf("SpaceKey(%v, %q) = SpaceKey(%v, %q) = %q", spa, a, spb, b, ka)
		}
		if spa != limit.SpaceUser && spa != limit.SpaceReceipt && hashed(a) != a && hashed(ka) != hashed(a) {
			t.Fatalf("SpaceKey(%v, %q) = %q hashes on %q, not the user's tag", spa, a, ka, hashed(ka))
		}
		checkReceiptKey(t, a, b)
	})
}

// checkReceiptKey states the receipt layout's promises for two user keys:
// a receipt's key is on the slot of its key's state (one script writes
// both), under the receipt prefix, and distinct (key, id) pairs never
// share one.
func checkReceiptKey(t *testing.T, a, b string) {
	t.Helper()
	ida, idb := limit.NewReceipt(), limit.NewReceipt()
	ra := ReceiptKey(a, ida)
	if !strings.HasPrefix(ra, ReceiptPrefix) || Slot(ra) != Slot(Key(a)) {
		t.Fatalf("ReceiptKey(%q) = %q: slot %d, the state %q's is %d", a, ra, Slot(ra), Key(a), Slot(Key(a)))
	}
	if sp, user, ok := unKey(strings.TrimSuffix(ra, ":"+ida)); !ok || sp != limit.SpaceReceipt || user != a {
		t.Fatalf("ReceiptKey(%q) = %q reads back as %v %q %v", a, ra, sp, user, ok)
	}
	for _, other := range []string{ReceiptKey(b, ida), ReceiptKey(a, idb), ReceiptKey(b, idb)} {
		if other == ra && a != b {
			t.Fatalf("ReceiptKey(%q) and of %q share %q", a, b, ra)
		}
	}
	if ReceiptKey(a, idb) == ra {
		t.Fatalf("two receipts of %q share %q", a, ra)
	}
}

// TestKeyInjective: every user key of the shapes that collided before
// (x and {x}, a split sub-bucket's spelling, a region floor's) and the
// internal spaces give distinct Redis keys that read back as themselves.
func TestKeyInjective(t *testing.T) {
	t.Parallel()
	var users []string
	for _, k := range []string{"k", "login:carol", "a{b", "{a", "tenant}1", "{}k", "k}", "{t}k", "x{}"} {
		users = append(users, k, "{"+k+"}", "{"+k+"}}", "{t}"+k, k+"}", "{}"+k, k+"\x00region-floor",
			"sluice:"+k, "sluice:{"+k+"}", "sluice-split:{"+k+"}", "{0123abcd:"+k+"}")
	}
	seen := map[string]string{}
	for _, u := range users {
		for s := limit.SpaceUser; s <= limit.SpaceReceipt; s++ {
			k := SpaceKey(s, u)
			who := s.String() + " " + strconv.Quote(u)
			if prev, dup := seen[k]; dup && prev != who {
				t.Errorf("%s and %s share the Redis key %q", prev, who, k)
			}
			seen[k] = who
			if got, user, ok := unKey(k); !ok || got != s || user != u {
				t.Errorf("SpaceKey(%s) = %q reads back as %v %q %v", who, k, got, user, ok)
			}
		}
	}
}

// unKey is the inverse of SpaceKey: the space and user key of a Redis key.
func unKey(k string) (limit.Space, string, bool) {
	spaces := []struct {
		s      limit.Space
		prefix string
	}{{limit.SpaceUser, Prefix}, {limit.SpaceThrottle, ThrottlePrefix}, {limit.SpaceSplit, SplitPrefix}, {limit.SpacePool, PoolPrefix}, {limit.SpaceFloor, FloorPrefix},
		{limit.SpaceReceipt, ReceiptPrefix}}
	for _, sp := range spaces {
		r, ok := strings.CutPrefix(k, sp.prefix)
		if !ok {
			continue
		}
		if sp.s == limit.SpaceReceipt { // "{slot tag}" first, then as the others
			tag, rest, ok := strings.Cut(r, "}")
			if !ok || !strings.HasPrefix(tag, "{") {
				return 0, "", false
			}
			r = rest
		}
		first := strings.IndexByte(r, '}')
		switch {
		case strings.HasPrefix(r, "{}"):
			return sp.s, r[2:], true
		case strings.HasPrefix(r, "{") && first == len(r)-1:
			return sp.s, r[1 : len(r)-1], true
		case strings.HasPrefix(r, "{") && first > 1 && strings.Trim(r[first:], "}") == "":
			return sp.s, r[:len(r)-1], true
		}
		return sp.s, r, true
	}
	return 0, "", false
}
