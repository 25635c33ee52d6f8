package acl

import (
	"strings"
	"testing"
)

// FuzzParse: any file either parses or gives a file:line error; it never
// panics, an error never repeats a password rule, and whatever parses
// answers Check and Describe for every key.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		sample, "user a on >x ~a:* +@limit", "user a %R~[a-", "user a on ~\\", "user b reset on nopass allkeys -@all +rl.policy",
		"user c on <y", "user d on #zz", "user e (x)", "usr", "user", "\n\n# c\nuser f on +@all -acl|load ~* &*",
	} {
		f.Add(s, "key")
	}
	f.Fuzz(func(t *testing.T, data, key string) {
		l, err := Parse("f.acl", []byte(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.acl:") {
				t.Fatalf("error without file:line: %v", err)
			}
			for _, line := range strings.Split(data, "\n") {
				fields := strings.Fields(line)
				for _, w := range fields[min(2, len(fields)):] { // the rules, after "user <name>"
					if len(w) > 4 && strings.ContainsRune("><#!", rune(w[0])) && strings.Contains(err.Error(), w) {
						t.Fatalf("error %q repeats the rule %q", err, w)
					}
				}
			}
			return
		}
		for _, n := range l.Names() {
			u := l.User(n)
			_ = u.Describe()
			_ = u.Check("rl.mtake", []byte(key), []byte(key+"x"))
			_ = u.CanAccess([]byte(key), Read)
		}
		_, _ = l.Authenticate([]byte("a"), []byte(key))
	})
}
