package acl

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/internal/redistest"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pat, key string
		want     bool
	}{
		{"*", "", false}, // as stringmatchlen: no key byte to match (a key is never empty)
		{"*", "x", true},
		{"acme:*", "acme:", true},
		{"acme:*", "acme:x", true},
		{"acme:*", "acm", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"[ab]x", "bx", true},
		{"[^ab]x", "bx", false},
		{"[a-c]x", "cx", true},
		{"[c-a]x", "bx", true},
		{`\*`, "*", true},
		{`\*`, "a", false},
		{`a\`, `a\`, true},
		{"[]x", "]x", false},
		{"[abc", "a", true},
		{"*a*b*c*", "xaybzc", true},
		{"*a*b*c*d", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaabbbbbbbbbbbbbbccccccccc", false},
		{"{acme}:*", "{acme}:login", true},
	}
	for _, tt := range tests {
		if got := match(tt.pat, tt.key); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pat, tt.key, got, tt.want)
		}
	}
}

// TestMatchAgreesWithRedis asks a real redis-server, through ACL DRYRUN,
// whether random patterns grant random keys, and compares.
func TestMatchAgreesWithRedis(t *testing.T) {
	n := redistest.NewSingle(t)
	rdb := n.Client()
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = `ab*?[]^-\`
	gen := func(max int) string {
		var b strings.Builder
		for range rng.IntN(max) + 1 {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	var yes, no int
	for i := range 300 {
		pat := gen(7)
		user := fmt.Sprintf("u%d", i)
		if err := rdb.Do(ctx, "ACL", "SETUSER", user, "on", "nopass", "resetkeys", "~"+pat, "+@all").Err(); err != nil {
			t.Fatalf("ACL SETUSER ~%s: %v", pat, err)
		}
		for range 20 {
			key := gen(6)
			// DRYRUN answers OK, or a bulk string saying why not.
			v, err := rdb.Do(ctx, "ACL", "DRYRUN", user, "GET", key).Text()
			if err != nil {
				t.Fatalf("ACL DRYRUN: %v", err)
			}
			redisSays := v == "OK"
			if redisSays {
				yes++
			} else {
				no++
			}
			if !redisSays && !strings.Contains(v, "no permissions to access") {
				t.Fatalf("ACL DRYRUN: %q", v)
			}
			if got := match(pat, key); got != redisSays {
				t.Errorf("match(%q, %q) = %v, Redis says %v", pat, key, got, redisSays)
			}
		}
	}
	if yes == 0 || no == 0 {
		t.Errorf("Redis granted %d and refused %d: the sample tests one side only", yes, no)
	}
	t.Logf("%d granted, %d refused, all as Redis", yes, no)
}
