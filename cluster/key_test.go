package cluster

import (
	"strconv"
	"strings"
	"testing"
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
		{"{{a}}", "sluice:{{a}}"},     // tag "{a", kept
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

// FuzzKey: the layout's promises for any key, and no two keys on one Redis
// key (x and {x} excepted, which the README states).
func FuzzKey(f *testing.F) {
	for _, s := range []string{"acme", "{acme}:x", "tenant}1", "a{}b", "{}", "}{a}", "{{a}}", "a{b", "", "{", "}"} {
		f.Add(s, s+"}")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		checkKey(t, a)
		checkKey(t, b)
		if a != b && Key(a) == Key(b) && "{"+a+"}" != b && "{"+b+"}" != a {
			t.Fatalf("Key(%q) = Key(%q) = %q", a, b, Key(a))
		}
	})
}
