package acl

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// The users that FromFlags makes, and the user every unauthenticated
// connection is.
const (
	DefaultUser = "default"
	AdminUser   = "admin"
)

// List is a set of users by name. It is immutable once made by Parse or
// FromFlags, and safe for concurrent use; a reload makes a new List.
type List struct {
	users map[string]*User
	names []string // sorted
	// decoy is compared against when the named user does not exist, so
	// that a failed AUTH takes the same time whether or not it does.
	decoy [1][sha256.Size]byte
}

// User is one user of a List: whether it is enabled, its passwords (as
// SHA-256 digests), the commands it may run and the keys it may touch. It
// is immutable and safe for concurrent use.
type User struct {
	name      string
	on        bool
	nopass    bool
	passwords [][sha256.Size]byte
	allKeys   bool
	patterns  []keyPattern
	allowed   map[string]bool // full command names; connection commands are not listed
	// cmdRules are the command rules as written since the last one that
	// set every command at once, for Describe.
	cmdRules []string
}

type keyPattern struct {
	glob   string
	access Access
}

// Name returns the user's name.
func (u *User) Name() string { return u.name }

// Enabled reports whether the user is "on": only then can it authenticate.
func (u *User) Enabled() bool { return u.on }

// NoPass reports whether the user takes any password ("nopass").
func (u *User) NoPass() bool { return u.nopass }

// CanRun reports whether the user may run the command named cmd: its
// lower-case full name, "container|sub" for a subcommand ("rl.take",
// "rl.policy|set"). Connection commands are always allowed; a command this
// package does not know never is.
func (u *User) CanRun(cmd string) bool {
	s, ok := commands[cmd]
	if !ok {
		return false
	}
	return s.cat == CatConnection || u.allowed[cmd]
}

// CanKey reports whether the user may read and write key.
func (u *User) CanKey(key []byte) bool { return u.CanAccess(key, ReadWrite) }

// CanAccess reports whether one of the user's key patterns grants every
// access of need on key (Redis's rule: a pattern must grant all of it).
func (u *User) CanAccess(key []byte, need Access) bool {
	if u.allKeys {
		return true
	}
	for i := range u.patterns {
		p := &u.patterns[i]
		if p.access&need == need && match(p.glob, string(key)) {
			return true
		}
	}
	return false
}

// Check reports why the user may not run cmd on keys, or nil: a *Denied
// naming the command, or the first key that no pattern grants the access
// cmd needs. A door calls it once per command, before running any of it,
// so a command with one key outside the user's patterns does nothing.
func (u *User) Check(cmd string, keys ...[]byte) error {
	if !u.CanRun(cmd) {
		return &Denied{User: u.name, Reason: ReasonCommand, Object: cmd}
	}
	need := KeyAccess(cmd)
	if need == 0 {
		need = ReadWrite
	}
	for _, k := range keys {
		if !u.CanAccess(k, need) {
			return &Denied{User: u.name, Reason: ReasonKey, Object: string(k)}
		}
	}
	return nil
}

// The reasons of a Denied, and of ACL LOG entries, as Redis names them.
const (
	ReasonCommand = "command"
	ReasonKey     = "key"
	ReasonAuth    = "auth"
)

// Denied is a refused command: Reason is ReasonCommand (Object the
// command's full name) or ReasonKey (Object the key). Its Error is
// Redis's NOPERM text, which names the command but never the key.
type Denied struct {
	User, Reason, Object string
}

func (d *Denied) Error() string {
	if d.Reason == ReasonKey {
		return "NOPERM No permissions to access a key"
	}
	return "NOPERM User " + d.User + " has no permissions to run the '" + d.Object + "' command"
}

// Describe is the user's line of ACL LIST, in Redis's form: `user acme on
// #<sha256> ~acme:* resetchannels -@all +@limit +@slot`. It shows digests,
// never a password.
func (u *User) Describe() string {
	var b strings.Builder
	b.WriteString("user ")
	b.WriteString(u.name)
	if u.on {
		b.WriteString(" on")
	} else {
		b.WriteString(" off")
	}
	if u.nopass {
		b.WriteString(" nopass")
	}
	for _, d := range u.passwords {
		b.WriteString(" #")
		b.WriteString(hex.EncodeToString(d[:]))
	}
	if u.allKeys {
		b.WriteString(" ~*")
	}
	for _, p := range u.patterns {
		b.WriteByte(' ')
		switch p.access {
		case Read:
			b.WriteString("%R")
		case Write:
			b.WriteString("%W")
		}
		b.WriteByte('~')
		b.WriteString(p.glob)
	}
	b.WriteString(" resetchannels")
	for _, r := range u.cmdRules {
		b.WriteByte(' ')
		b.WriteString(r)
	}
	return b.String()
}

// User returns the user named name, or nil.
func (l *List) User(name string) *User { return l.users[name] }

// Names returns the users' names, sorted (ACL USERS).
func (l *List) Names() []string { return slices.Clone(l.names) }

// Describe returns every user's ACL LIST line, sorted by name.
func (l *List) Describe() []string {
	out := make([]string, len(l.names))
	for i, n := range l.names {
		out[i] = l.users[n].Describe()
	}
	return out
}

// Default returns the user a new connection is before any AUTH: the
// "default" user when it is on and nopass, as in Redis; nil when clients
// must authenticate first.
func (l *List) Default() *User {
	if u := l.users[DefaultUser]; u != nil && u.on && u.nopass {
		return u
	}
	return nil
}

// Authenticate returns the user named user if pass is one of its
// passwords (any pass for a nopass user) and it is on; otherwise nil and
// false. The password is compared as a SHA-256 digest with
// crypto/subtle against every password of the user, or against a decoy
// when there is no such user, so the time taken tells neither whether the
// user exists nor anything about the password.
func (l *List) Authenticate(user, pass []byte) (*User, bool) {
	d := sha256.Sum256(pass)
	u := l.users[string(user)]
	digests := l.decoy[:]
	if u != nil {
		digests = u.passwords
	}
	ok := 0
	for i := range digests {
		ok |= subtle.ConstantTimeCompare(d[:], digests[i][:])
	}
	if u == nil || !u.on || (ok == 0 && !u.nopass) {
		return nil, false
	}
	return u, true
}

// FromFlags is the List of --requirepass and --admin-pass: "default" may
// run every command but the admin ones on every key (with requirepass as
// its password, or nopass when it is empty), and "admin", only when
// adminpass is set, may run everything. Without adminpass there is no
// admin user and "default" may run the admin commands too, as sluice did
// before users existed; CLIENT LIST stays open to "default" either way.
func FromFlags(requirepass, adminpass string) *List {
	def := newUser(DefaultUser)
	def.on, def.allKeys = true, true
	if requirepass == "" {
		def.nopass = true
	} else {
		def.passwords = append(def.passwords, sha256.Sum256([]byte(requirepass)))
	}
	users := []*User{def}
	if adminpass == "" {
		mustApply(def, "+@all")
	} else {
		mustApply(def, "+@all", "-@admin", "+client|list")
		admin := newUser(AdminUser)
		admin.on, admin.allKeys = true, true
		admin.passwords = append(admin.passwords, sha256.Sum256([]byte(adminpass)))
		mustApply(admin, "+@all")
		users = append(users, admin)
	}
	return newList(users)
}

func mustApply(u *User, rules ...string) {
	for _, r := range rules {
		if msg := u.apply(r); msg != "" {
			panic("acl: built-in rule " + r + ": " + msg)
		}
	}
}

func newUser(name string) *User {
	return &User{name: name, allowed: map[string]bool{}, cmdRules: []string{"-@all"}}
}

func newList(users []*User) *List {
	l := &List{users: map[string]*User{}}
	for _, u := range users {
		l.users[u.name] = u
		l.names = append(l.names, u.name)
	}
	slices.Sort(l.names)
	l.decoy[0] = sha256.Sum256([]byte("sluice: no such user"))
	return l
}

// Parse reads an ACL file in Redis's syntax, one user a line:
//
//	user <name> <rule> ...
//
// Blank lines and lines whose first non-blank character is '#' are
// skipped. A user is off, with no password, no key and no command unless
// its rules say otherwise; "nopass" only where written. A "default" user
// the file does not name is off (Redis would make it nopass with every
// command), so an unauthenticated client can do nothing but authenticate.
// The error names file:line and the bad rule, never a password: a rule
// that starts with '>', '<', '#' or '!' is shown by its first character.
func Parse(file string, data []byte) (*List, error) {
	var users []*User
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if fields[0] != "user" {
			return nil, fmt.Errorf("%s:%d: line should start with user keyword, got %q", file, n, redact(fields[0]))
		}
		if len(fields) < 2 {
			return nil, fmt.Errorf("%s:%d: user keyword without a user name", file, n)
		}
		name := fields[1]
		if prev, dup := seen[name]; dup {
			return nil, fmt.Errorf("%s:%d: duplicate user '%s' (first on line %d)", file, n, name, prev)
		}
		seen[name] = n
		u := newUser(name)
		for _, rule := range fields[2:] {
			if msg := u.apply(rule); msg != "" {
				return nil, fmt.Errorf("%s:%d: user '%s': error in rule '%s': %s", file, n, name, redact(rule), msg)
			}
		}
		users = append(users, u)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if _, ok := seen[DefaultUser]; !ok {
		users = append(users, newUser(DefaultUser))
	}
	return newList(users), nil
}

// redact hides what a password rule carries.
func redact(rule string) string {
	if rule != "" && strings.ContainsRune("><#!", rune(rule[0])) {
		return rule[:1] + "<redacted>"
	}
	return rule
}

// apply applies one rule to u, as Redis's ACLSetUser; it returns why the
// rule is refused, or "".
func (u *User) apply(rule string) string {
	lower := strings.ToLower(rule)
	switch lower {
	case "on":
		u.on = true
		return ""
	case "off":
		u.on = false
		return ""
	case "nopass":
		u.nopass, u.passwords = true, nil
		return ""
	case "resetpass":
		u.nopass, u.passwords = false, nil
		return ""
	case "allkeys":
		u.allKeys, u.patterns = true, nil
		return ""
	case "resetkeys":
		u.allKeys, u.patterns = false, nil
		return ""
	case "allchannels", "resetchannels", "sanitize-payload", "skip-sanitize-payload":
		return "" // sluice has no channels and no payloads to sanitize
	case "allcommands":
		return u.applyCommand("+@all")
	case "nocommands":
		return u.applyCommand("-@all")
	case "reset":
		for _, r := range []string{"resetpass", "resetkeys", "off", "-@all"} {
			u.apply(r)
		}
		return ""
	case "clearselectors":
		return "selectors are not supported"
	}
	switch rule[0] {
	case '>', '<':
		d := sha256.Sum256([]byte(rule[1:]))
		if rule[0] == '>' {
			u.addPassword(d)
			return ""
		}
		return u.removePassword(d)
	case '#', '!':
		d, ok := parseDigest(rule[1:])
		if !ok {
			return "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
		}
		if rule[0] == '#' {
			u.addPassword(d)
			return ""
		}
		return u.removePassword(d)
	case '~', '%':
		return u.addPattern(rule)
	case '&':
		return "" // a channel pattern: nothing to apply
	case '+', '-':
		return u.applyCommand(lower)
	case '(':
		return "selectors are not supported"
	}
	return "Syntax error"
}

func (u *User) addPassword(d [sha256.Size]byte) {
	u.nopass = false
	if !slices.Contains(u.passwords, d) {
		u.passwords = append(u.passwords, d)
	}
}

func (u *User) removePassword(d [sha256.Size]byte) string {
	i := slices.Index(u.passwords, d)
	if i < 0 {
		return "The password you are trying to remove from the user does not exist"
	}
	u.passwords = slices.Delete(u.passwords, i, i+1)
	return ""
}

func parseDigest(s string) ([sha256.Size]byte, bool) {
	var d [sha256.Size]byte
	if len(s) != 2*sha256.Size || strings.ToLower(s) != s {
		return d, false
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, false
	}
	return d, true
}

// addPattern applies ~pattern, %R~pattern, %W~pattern or %RW~pattern.
func (u *User) addPattern(rule string) string {
	access, glob := ReadWrite, rule[1:]
	if rule[0] == '%' {
		flags, g, ok := strings.Cut(rule[1:], "~")
		if !ok || flags == "" {
			return "Syntax error"
		}
		access = 0
		for _, f := range strings.ToUpper(flags) {
			switch f {
			case 'R':
				access |= Read
			case 'W':
				access |= Write
			default:
				return "Syntax error"
			}
		}
		glob = g
	}
	if u.allKeys {
		return "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns"
	}
	if glob == "*" && access == ReadWrite {
		u.allKeys, u.patterns = true, nil
		return ""
	}
	u.patterns = append(u.patterns, keyPattern{glob: glob, access: access})
	return ""
}

// applyCommand applies +name, -name, +@category or -@category (lower
// case) over the commands of the table.
func (u *User) applyCommand(rule string) string {
	add, name := rule[0] == '+', rule[1:]
	var names []string
	if cat, ok := strings.CutPrefix(name, "@"); ok {
		if names = CommandsIn(cat); names == nil {
			return "Unknown command or category name in ACL"
		}
	} else if names = expand(name); names == nil {
		return "Unknown command or category name in ACL"
	}
	for _, n := range names {
		if add {
			u.allowed[n] = true
		} else {
			delete(u.allowed, n)
		}
	}
	if name == "@all" {
		u.cmdRules = u.cmdRules[:0]
	}
	u.cmdRules = append(u.cmdRules, rule)
	return ""
}
