package policy

import (
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		pat, key string
		want     bool
		kind     matchKind
	}{
		{"*", "", true, kindAll},
		{"*", "anything", true, kindAll},
		{"**", "x", true, kindAll},
		{"login:*", "login:42", true, kindPrefix},
		{"login:*", "login:", true, kindPrefix},
		{"login:*", "login", false, kindPrefix},
		{"login:*", "xlogin:1", false, kindPrefix},
		{"login", "login", true, kindExact},
		{"login", "login2", false, kindExact},
		{`a\*b`, "a*b", true, kindExact},
		{`a\*b`, "axb", false, kindExact},
		{`a\*`, "a*", true, kindExact},
		{`a\**`, "a*bc", true, kindPrefix},
		{`a\**`, "abc", false, kindPrefix},
		{`a\\`, `a\`, true, kindExact},
		{"*:login", "user:login", true, kindSuffix},
		{"*:login", "user:logout", false, kindSuffix},
		{"*:api:*", "x:api:y", true, kindContains},
		{"*:api:*", "x:apix", false, kindContains},
		{"user:?", "user:1", true, kindGlob},
		{"user:?", "user:", false, kindGlob},
		{"user:?", "user:12", false, kindGlob},
		{"user:?", "user:é", true, kindGlob}, // one rune, two bytes
		{"user:??", "user:é", false, kindGlob},
		{"h[ae]llo", "hello", true, kindGlob},
		{"h[ae]llo", "hallo", true, kindGlob},
		{"h[ae]llo", "hillo", false, kindGlob},
		{"h[^e]llo", "hallo", true, kindGlob},
		{"h[^e]llo", "hello", false, kindGlob},
		{"h[a-b]llo", "hbllo", true, kindGlob},
		{"h[a-b]llo", "hcllo", false, kindGlob},
		{"h[b-a]llo", "hallo", true, kindGlob}, // reversed range, as Redis
		{"h[a-]llo", "h-llo", true, kindGlob},
		{`h[\]]llo`, "h]llo", true, kindGlob},
		{`h[\-a]llo`, "h-llo", true, kindGlob},
		{"h[é-ë]llo", "hêllo", true, kindGlob},
		{"h[é-ë]llo", "hello", false, kindGlob},
		{"a*b*c", "abc", true, kindGlob},
		{"a*b*c", "aXXbYYc", true, kindGlob},
		{"a*b*c", "aXXbYY", false, kindGlob},
		{"a*b*c", "acb", false, kindGlob},
		{"*a*b", "ab", true, kindGlob},
		{"*a*b", "bab", true, kindGlob},
		{"*a?b*", "xxaxbyy", true, kindGlob},
		{"a*", "a\xff", true, kindPrefix},
		{"a?", "a\xff", true, kindGlob}, // an invalid byte is one character
		{"a??", "a\xff", false, kindGlob},
		{"*\xc3\xa9", "caf\xc3\xa9", true, kindSuffix},
		{"user:*:name", "user:1:name", true, kindGlob},
		{"user:*:name", "user:1:2:name", true, kindGlob},
		{"user:*:name", "user:1:names", false, kindGlob},
		{"*x", "", false, kindSuffix},
		{"?*", "", false, kindGlob},
		{"?*", "a", true, kindGlob},
	}
	for _, tt := range tests {
		m, msg := compileGlob(tt.pat)
		if msg != "" {
			t.Errorf("compileGlob(%q): %s", tt.pat, msg)
			continue
		}
		if m.kind != tt.kind {
			t.Errorf("compileGlob(%q).kind = %d, want %d", tt.pat, m.kind, tt.kind)
		}
		if got := m.match(tt.key); got != tt.want {
			t.Errorf("match(%q, %q) = %v, want %v", tt.pat, tt.key, got, tt.want)
		}
		if got := m.glob(tt.key); got != tt.want {
			t.Errorf("glob(%q, %q) = %v, want %v (the general path disagrees with the fast one)", tt.pat, tt.key, got, tt.want)
		}
	}
}

func TestGlobInvalid(t *testing.T) {
	tests := []struct{ pat, want string }{
		{"", "must not be empty"},
		{"[", `unterminated [ at byte 0 of "["`},
		{"a[bc", `unterminated [ at byte 1 of "a[bc"`},
		{`a[\`, `unterminated [ at byte 1 of "a[\\"`},
		{`a[b-\`, `unterminated [ at byte 1 of "a[b-\\"`},
		{"[]", `empty [] class at byte 0 of "[]"`},
		{"[^]", `empty [] class at byte 0 of "[^]"`},
		{`x\`, `trailing \ escapes nothing in "x\\" (write \\ for a backslash)`},
		{"\xff", "must be valid UTF-8"},
		{strings.Repeat("a", maxPatternBytes+1), "must be at most 1024 bytes, got 1025"},
	}
	for _, tt := range tests {
		if _, msg := compileGlob(tt.pat); msg != tt.want {
			t.Errorf("compileGlob(%q) = %q, want %q", tt.pat, msg, tt.want)
		}
	}
}

// TestGlobNotExponential runs the patterns that make recursive matchers
// (Redis's stringmatchlen, tidwall/match without a limit) take exponential
// time. Ours is O(len(key) × len(pattern)); the test would time out if not.
func TestGlobNotExponential(t *testing.T) {
	key := strings.Repeat("a", 64<<10)
	for _, pat := range []string{
		strings.Repeat("*a", 30) + "b",
		strings.Repeat("a*", 30) + "b",
		strings.Repeat("*?", 30) + "b",
		strings.Repeat("*[a]", 30) + "[b]",
	} {
		m, msg := compileGlob(pat)
		if msg != "" {
			t.Fatal(msg)
		}
		if m.match(key) {
			t.Errorf("%q matched a key of only 'a'", pat)
		}
	}
}

func TestCovers(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"*", "x", true},
		{"*", "a[bc]", true},
		{"a:*", "a:b", true},
		{"a:*", "a:b*", true},
		{"a:*", "a*", false},
		{"a:*", "a:[bc]", false}, // true, but not worth knowing
		{"x", "x", true},
		{"x", "x*", false},
		{"*:x", "a:x", true},
		{"*:x", "*a:x", true},
		{"*a*", "bab", true},
		{"*a*", "b*a", false}, // true, but b is a general glob
		{"*a*", "b*", false},
		{"a?", "a?", true},
		{"a?", "ab", false},
	}
	for _, tt := range tests {
		a, _ := compileGlob(tt.a)
		b, _ := compileGlob(tt.b)
		if got := covers(&a, &b, tt.a, tt.b); got != tt.want {
			t.Errorf("covers(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestMatchFirstWins(t *testing.T) {
	s, err := Parse([]byte(`defaults: {on_store_error: open, limit: 1, rate: 1}
policies:
  - {name: exact, match: "login:admin"}
  - {name: login, match: "login:*"}
  - {name: classy, match: "[ab]:*"}
  - {name: suffix, match: "*:img"}
  - {name: all, match: "*"}
`), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ key, want string }{
		{"login:admin", "exact"},
		{"login:bob", "login"},
		{"login:x:img", "login"},
		{"a:1", "classy"},
		{"c:1", "all"},
		{"c:img", "suffix"},
		{"", "all"},
	}
	for _, tt := range tests {
		if p := s.Match(tt.key); p == nil || p.Name != tt.want {
			t.Errorf("Match(%q) = %v, want %s", tt.key, p, tt.want)
		}
	}
	s, err = Parse([]byte("policies: [{name: a, match: 'a:*', limit: 1, rate: 1, on_store_error: open}]"), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Match("b"); p != nil {
		t.Errorf("Match(b) = %v, want nil", p)
	}
}

// refGlob is a plain recursive reading of the glob rules, with a memo: slow
// but obviously right, for the fuzz test to check the fast matcher against.
func refGlob(pat, key []rune) bool {
	memo := map[[2]int]bool{}
	var rec func(p, k int) bool
	rec = func(p, k int) bool {
		id := [2]int{p, k}
		if v, ok := memo[id]; ok {
			return v
		}
		var r bool
		switch {
		case p == len(pat):
			r = k == len(key)
		case pat[p] == '*':
			r = rec(p+1, k) || (k < len(key) && rec(p, k+1))
		case k == len(key):
			r = false
		case pat[p] == '?':
			r = rec(p+1, k+1)
		case pat[p] == '[':
			i, neg, in := p+1, false, false
			if pat[i] == '^' {
				neg, i = true, i+1
			}
			for pat[i] != ']' {
				lo := pat[i]
				if lo == '\\' {
					i++
					lo = pat[i]
				}
				i++
				hi := lo
				if pat[i] == '-' && pat[i+1] != ']' {
					i++
					if hi = pat[i]; hi == '\\' {
						i++
						hi = pat[i]
					}
					i++
					lo, hi = min(lo, hi), max(lo, hi)
				}
				in = in || (lo <= key[k] && key[k] <= hi)
			}
			r = in != neg && rec(i+1, k+1)
		case pat[p] == '\\':
			r = pat[p+1] == key[k] && rec(p+2, k+1)
		default:
			r = pat[p] == key[k] && rec(p+1, k+1)
		}
		memo[id] = r
		return r
	}
	return rec(0, 0)
}

func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"*", "x"}, {"a*", "ab"}, {"*a", "ba"}, {"*a*", "bab"}, {"a", "a"},
		{"a*b*c", "aXbYc"}, {"h[^e]llo", "hallo"}, {`h[\]-a]llo`, "hallo"},
		{`\*x?`, "*xy"}, {"[é-ë]?", "êa"}, {"*[a]*[b]", "xaybzb"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pat, key string) {
		m, msg := compileGlob(pat)
		if msg != "" {
			return
		}
		got := m.match(key)
		if g := m.glob(key); g != got {
			t.Fatalf("%q, %q: fast path %v, glob %v", pat, key, got, g)
		}
		if !utf8.ValidString(key) || len(pat) > 64 || len(key) > 64 {
			return
		}
		if want := refGlob([]rune(pat), []rune(key)); got != want {
			t.Fatalf("match(%q, %q) = %v, reference says %v", pat, key, got, want)
		}
		// Away from '/', which its wildcards do not cross, our globs are
		// path.Match's wherever it takes the pattern: a second opinion
		// written by someone else.
		if !strings.Contains(pat+key, "/") {
			if want, err := path.Match(pat, key); err == nil && got != want {
				t.Fatalf("match(%q, %q) = %v, path.Match says %v", pat, key, got, want)
			}
		}
	})
}
