package acl

// match reports whether key matches the glob pattern with exactly the
// semantics of Redis's stringmatchlen (util.c), case-sensitive, on bytes:
// `*` any run, `?` one byte, `[abc]`, `[a-z]`, `[^a]` a class, `\x` the
// byte x. Quirks are Redis's too: a trailing `\` matches a backslash, an
// unterminated class ends at the end of the pattern, `[]` matches nothing.
// A pattern of an ACL must mean for sluice what it would mean for Redis,
// so this is a port, not policy's stricter UTF-8 matcher. Like Redis 7 it
// stops retrying a star once a later star failed at every offset
// (skipLongerMatches), which bounds the work by len(pattern)×len(key).
func match(pattern, key string) bool {
	skip := false
	return matchImpl(pattern, key, &skip, 0)
}

func matchImpl(p, s string, skipLonger *bool, nesting int) bool {
	if nesting > 1000 { // Redis's protection against abusive patterns
		return false
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for len(s) > 0 {
				if matchImpl(p[1:], s, skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
				s = s[1:]
			}
			*skipLonger = true
			return false
		case '?':
			s = s[1:]
		case '[':
			var ok bool
			if p, ok = matchClass(p[1:], s[0]); !ok {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}

// matchClass matches c against the class that p starts with (after its
// '['), as stringmatchlen does, and returns p at the class's last byte (its
// ']'), or empty when the class is unterminated.
func matchClass(p string, c byte) (string, bool) {
	not := len(p) > 0 && p[0] == '^'
	if not {
		p = p[1:]
	}
	matched := false
	for {
		if len(p) >= 2 && p[0] == '\\' {
			p = p[1:]
			if p[0] == c {
				matched = true
			}
		} else if len(p) > 0 && p[0] == ']' {
			break
		} else if len(p) == 0 {
			// Unterminated: Redis steps back so that the caller's
			// step past the class lands on the end.
			p = " "
			break
		} else if len(p) >= 3 && p[1] == '-' {
			lo, hi := p[0], p[2]
			if lo > hi {
				lo, hi = hi, lo
			}
			p = p[2:]
			if lo <= c && c <= hi {
				matched = true
			}
		} else if p[0] == c {
			matched = true
		}
		p = p[1:]
	}
	return p, matched != not
}
