package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-rl/sluice/limit"
)

// BenchmarkMatch measures Set.Match, the lookup of every request, for each
// shape of pattern, with the matching policy first, and behind 63 others.
func BenchmarkMatch(b *testing.B) {
	pol := func(name, match string) *limit.Policy {
		return &limit.Policy{Name: name, Match: match, Limit: 1, Rate: 1, OnStoreError: limit.FailOpen}
	}
	cases := []struct {
		name, pattern, key string
	}{
		{"all", "*", "user:12345:profile"},
		{"exact", "user:12345:profile", "user:12345:profile"},
		{"prefix", "user:*", "user:12345:profile"},
		{"suffix", "*:profile", "user:12345:profile"},
		{"contains", "*:12345:*", "user:12345:profile"},
		{"glob", "user:*:profile", "user:12345:profile"},
		{"glob-class", "user:[0-9]*:pro?ile", "user:12345:profile"},
		{"glob-long-key", "*a*b*c*d", strings.Repeat("abc", 100) + "d"},
	}
	for _, c := range cases {
		for _, before := range []int{0, 63} {
			var ps []*limit.Policy
			for i := range before {
				ps = append(ps, pol(fmt.Sprint("miss", i), fmt.Sprintf("miss%d:*", i)))
			}
			want := pol("hit", c.pattern)
			s, err := NewSet(0, append(ps, want)...)
			if err != nil {
				b.Fatal(err)
			}
			if got := s.Match(c.key); got != want {
				b.Fatalf("%s: Match(%q) = %v, want policy %q", c.name, c.key, got, want.Name)
			}
			b.Run(fmt.Sprintf("%s/policies=%d", c.name, before+1), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					_ = s.Match(c.key)
				}
			})
		}
	}
	b.Run("design-config/parallel", func(b *testing.B) {
		s, err := Parse([]byte(designConfig), "sluice.yaml")
		if err != nil {
			b.Fatal(err)
		}
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = fmt.Sprintf("api:user:%d", i)
		}
		keys[0] = "login:hot" // one hot key among uniform ones
		if s.Match(keys[0]).Name != "login" || s.Match(keys[1]).Name != "api" {
			b.Fatal("setup: keys do not reach the intended policies")
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				_ = s.Match(keys[i&1023])
				i++
			}
		})
	})
}

func BenchmarkParse(b *testing.B) {
	data := []byte(designConfig)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data, "sluice.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
