package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxPatternBytes bounds a match pattern, so that the O(len(key) ×
// len(pattern)) worst case of a glob stays small.
const maxPatternBytes = 1024

// matchKind selects how a compiled pattern is tested. Everything but
// kindGlob is a fast path with no loop over the pattern.
type matchKind uint8

const (
	kindGlob     matchKind = iota // general glob, atoms
	kindAll                       // "*"
	kindExact                     // no wildcard: key == lit
	kindPrefix                    // "lit*"
	kindSuffix                    // "*lit"
	kindContains                  // "*lit*"
)

// matcher is a compiled glob. The zero value matches nothing useful; build
// one with compileGlob. It is immutable and safe for concurrent use.
type matcher struct {
	kind  matchKind
	lit   string // the literal of the fast paths, unescaped
	atoms []atom // the pattern; only kindGlob reads them
}

type atomKind uint8

const (
	atomLit   atomKind = iota // a run of literal bytes
	atomAny                   // ?
	atomStar                  // *
	atomClass                 // [...]
)

type atom struct {
	kind   atomKind
	neg    bool   // [^...]
	lit    string // atomLit
	ranges []rune // atomClass: lo, hi pairs
}

// compileGlob compiles a Redis KEYS-style pattern: `*` is any run of
// characters, `?` one character, `[abc]`, `[a-z]` and `[^a]` a class, and
// `\` makes the next character literal. Characters are UTF-8 runes; a byte
// of a key that is not valid UTF-8 counts as one character.
//
// Unlike Redis, which guesses, it rejects what is surely a typo: an
// unterminated class, an empty class, a trailing backslash and a pattern
// that is not valid UTF-8. The message is "" when the pattern is valid.
func compileGlob(pat string) (matcher, string) {
	switch {
	case pat == "":
		return matcher{}, "must not be empty"
	case len(pat) > maxPatternBytes:
		return matcher{}, fmt.Sprintf("must be at most %d bytes, got %d", maxPatternBytes, len(pat))
	case !utf8.ValidString(pat):
		return matcher{}, "must be valid UTF-8"
	}
	var atoms []atom
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			atoms = append(atoms, atom{kind: atomLit, lit: string(lit)})
			lit = lit[:0]
		}
	}
	for i := 0; i < len(pat); {
		switch c := pat[i]; c {
		case '*':
			flush()
			if len(atoms) == 0 || atoms[len(atoms)-1].kind != atomStar {
				atoms = append(atoms, atom{kind: atomStar})
			}
			i++
		case '?':
			flush()
			atoms = append(atoms, atom{kind: atomAny})
			i++
		case '[':
			flush()
			a, n, msg := compileClass(pat[i:])
			if msg != "" {
				return matcher{}, fmt.Sprintf("%s at byte %d of %q", msg, i, pat)
			}
			atoms = append(atoms, a)
			i += n
		case '\\':
			if i+1 == len(pat) {
				return matcher{}, fmt.Sprintf(`trailing \ escapes nothing in %q (write \\ for a backslash)`, pat)
			}
			_, w := utf8.DecodeRuneInString(pat[i+1:])
			lit = append(lit, pat[i+1:i+1+w]...)
			i += 1 + w
		default:
			lit = append(lit, c)
			i++
		}
	}
	flush()
	return fastPath(atoms), ""
}

// compileClass compiles the class at the start of s ("[...]") and returns
// it with the number of bytes it spans.
func compileClass(s string) (atom, int, string) {
	a := atom{kind: atomClass}
	i := 1
	if i < len(s) && s[i] == '^' {
		a.neg = true
		i++
	}
	// next reads one class character, honouring the \ escape.
	next := func() (rune, bool) {
		if s[i] == '\\' {
			i++
			if i == len(s) {
				return 0, false
			}
		}
		r, w := utf8.DecodeRuneInString(s[i:])
		i += w
		return r, true
	}
	for {
		if i >= len(s) {
			return atom{}, 0, "unterminated ["
		}
		if s[i] == ']' {
			if len(a.ranges) == 0 {
				return atom{}, 0, "empty [] class"
			}
			return a, i + 1, ""
		}
		lo, ok := next()
		if !ok {
			return atom{}, 0, "unterminated ["
		}
		hi := lo
		if i+1 < len(s) && s[i] == '-' && s[i+1] != ']' {
			i++
			if hi, ok = next(); !ok {
				return atom{}, 0, "unterminated ["
			}
			if hi < lo { // as Redis does: [z-a] is [a-z]
				lo, hi = hi, lo
			}
		}
		a.ranges = append(a.ranges, lo, hi)
	}
}

// fastPath recognises the shapes that need no glob loop. The atoms are
// kept either way, so that tests can check a fast path against glob.
func fastPath(atoms []atom) matcher {
	is := func(i int, k atomKind) bool { return atoms[i].kind == k }
	m := matcher{kind: kindGlob, atoms: atoms}
	switch {
	case len(atoms) == 1 && is(0, atomStar):
		m.kind = kindAll
	case len(atoms) == 1 && is(0, atomLit):
		m.kind, m.lit = kindExact, atoms[0].lit
	case len(atoms) == 2 && is(0, atomLit) && is(1, atomStar):
		m.kind, m.lit = kindPrefix, atoms[0].lit
	case len(atoms) == 2 && is(0, atomStar) && is(1, atomLit):
		m.kind, m.lit = kindSuffix, atoms[1].lit
	case len(atoms) == 3 && is(0, atomStar) && is(1, atomLit) && is(2, atomStar):
		m.kind, m.lit = kindContains, atoms[1].lit
	}
	return m
}

// match reports whether key matches. It never allocates.
func (m *matcher) match(key string) bool {
	switch m.kind {
	case kindAll:
		return true
	case kindExact:
		return key == m.lit
	case kindPrefix:
		return strings.HasPrefix(key, m.lit)
	case kindSuffix:
		return strings.HasSuffix(key, m.lit)
	case kindContains:
		return strings.Contains(key, m.lit)
	}
	return m.glob(key)
}

// glob is the general matcher. It keeps one backtrack point, the last star
// seen: when the atoms after it fail, the star swallows one more character
// (or, before a literal, up to its next occurrence) and they are tried
// again. Earlier stars never need revisiting, because
// the last one can absorb whatever they would. So the worst case is
// O(len(key) × len(pattern)), never exponential, whatever the pattern or
// key — unlike the recursive matchers of Redis and tidwall/match, which
// need a step budget that, when exhausted, turns a match into "no match".
func (m *matcher) glob(s string) bool {
	atoms := m.atoms
	ai, si := 0, 0
	starA, starS := -1, 0
	for {
		if ai < len(atoms) {
			a := &atoms[ai]
			switch a.kind {
			case atomStar:
				if ai == len(atoms)-1 {
					return true
				}
				// A literal after the star can only match where it
				// occurs, so jump there. A literal never starts with a
				// UTF-8 continuation byte, so this never lands inside a
				// character that the one-by-one step would skip over.
				if next := &atoms[ai+1]; next.kind == atomLit {
					j := strings.Index(s[si:], next.lit)
					if j < 0 {
						return false
					}
					si += j
				}
				starA, starS = ai, si
				ai++
				continue
			case atomLit:
				if strings.HasPrefix(s[si:], a.lit) {
					si += len(a.lit)
					ai++
					continue
				}
			case atomAny:
				if si < len(s) {
					_, w := decodeRune(s[si:])
					si += w
					ai++
					continue
				}
			case atomClass:
				if si < len(s) {
					r, w := decodeRune(s[si:])
					if a.inClass(r) {
						si += w
						ai++
						continue
					}
				}
			}
		} else if si == len(s) {
			return true
		}
		if starA < 0 || starS >= len(s) {
			return false
		}
		// Re-enter the star one character further on.
		_, w := decodeRune(s[starS:])
		ai, si = starA, starS+w
	}
}

func (a *atom) inClass(r rune) bool {
	for i := 0; i < len(a.ranges); i += 2 {
		if a.ranges[i] <= r && r <= a.ranges[i+1] {
			return !a.neg
		}
	}
	return a.neg
}

// decodeRune is utf8.DecodeRuneInString with the ASCII case inline. An
// invalid byte decodes as utf8.RuneError of width 1.
func decodeRune(s string) (rune, int) {
	if s[0] < utf8.RuneSelf {
		return rune(s[0]), 1
	}
	return utf8.DecodeRuneInString(s)
}

// covers reports whether every key that b matches is also matched by a, for
// the shapes where that is cheap to know. It may answer false when the
// truth is true; it never answers true wrongly.
func covers(a, b *matcher, pa, pb string) bool {
	if pa == pb || a.kind == kindAll {
		return true
	}
	switch a.kind {
	case kindExact:
		return b.kind == kindExact && a.lit == b.lit
	case kindPrefix:
		return (b.kind == kindExact || b.kind == kindPrefix) && strings.HasPrefix(b.lit, a.lit)
	case kindSuffix:
		return (b.kind == kindExact || b.kind == kindSuffix) && strings.HasSuffix(b.lit, a.lit)
	case kindContains:
		return b.kind != kindAll && b.kind != kindGlob && strings.Contains(b.lit, a.lit)
	}
	return false
}
