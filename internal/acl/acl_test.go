package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"
)

func digest(pw string) string {
	d := sha256.Sum256([]byte(pw))
	return hex.EncodeToString(d[:])
}

const sample = `
# tenants
user acme on >acme-secret ~acme:* +@limit +@slot
user beta on #` + "%s" + ` >second ~beta:* %R~shared:* +@limit -rl.mtake
user ops on >ops-pw allkeys +@all -rl.reset
user off-user off >x ~* +@all
user open on nopass ~open:* +rl.take
`

func sampleList(t *testing.T) *List {
	t.Helper()
	data := strings.Replace(sample, "%s", digest("beta-secret"), 1)
	l, err := Parse("users.acl", []byte(data))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return l
}

func TestParseDescribe(t *testing.T) {
	l := sampleList(t)
	got := l.Describe()
	want := []string{
		"user acme on #" + digest("acme-secret") + " ~acme:* resetchannels -@all +@limit +@slot",
		"user beta on #" + digest("beta-secret") + " #" + digest("second") + " ~beta:* %R~shared:* resetchannels -@all +@limit -rl.mtake",
		"user default off resetchannels -@all",
		"user off-user off #" + digest("x") + " ~* resetchannels +@all",
		"user open on nopass ~open:* resetchannels -@all +rl.take",
		"user ops on #" + digest("ops-pw") + " ~* resetchannels +@all -rl.reset",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Describe:\n got %q\nwant %q", got, want)
	}
	if got, want := l.Names(), []string{"acme", "beta", "default", "off-user", "open", "ops"}; !slices.Equal(got, want) {
		t.Errorf("Names = %q, want %q", got, want)
	}
	for _, line := range got {
		for _, pw := range []string{"acme-secret", "beta-secret", "second", "ops-pw"} {
			if strings.Contains(line, pw) {
				t.Errorf("Describe line %q shows password %q", line, pw)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, data string
		want       []string // substrings of the error
		secret     string   // must not appear in the error
	}{
		{"no user keyword", "usr acme on", []string{"users.acl:1:", "usr"}, ""},
		{"no name", "\n\nuser", []string{"users.acl:3:", "without a user name"}, ""},
		{"duplicate", "user a on\nuser a off", []string{"users.acl:2:", "duplicate user 'a'"}, ""},
		{"unknown rule", "user a on bogus", []string{"users.acl:1:", "'bogus'", "Syntax error"}, ""},
		{"unknown command", "user a on +rl.nope", []string{"'+rl.nope'", "Unknown command or category"}, ""},
		{"unknown category", "user a on +@keyspace", []string{"'+@keyspace'", "Unknown command or category"}, ""},
		{"unknown subcommand", "user a on +rl.take|x", []string{"'+rl.take|x'"}, ""},
		{"bad hash", "user a on #abc123", []string{"users.acl:1:", "password hash"}, "abc123"},
		{"upper-case hash", "user a on #" + strings.ToUpper(digest("p")), []string{"password hash"}, strings.ToUpper(digest("p"))},
		{"remove missing password", "user a on <hunter2", []string{"does not exist"}, "hunter2"},
		{"remove missing hash", "user a on !" + digest("q"), []string{"does not exist"}, digest("q")},
		{"pattern after allkeys", "user a on allkeys ~x:*", []string{"'~x:*'", "resetkeys"}, ""},
		{"bad key flag", "user a on %X~x:*", []string{"'%X~x:*'", "Syntax error"}, ""},
		{"selectors", "user a on (~x +@all)", []string{"selectors are not supported"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("users.acl", []byte(tt.data))
			if err == nil {
				t.Fatal("Parse: no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
				t.Errorf("error %q shows the secret %q", err, tt.secret)
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	tests := []struct {
		name, rules string
		pass        string
		wantAuth    bool
	}{
		{"off by default", ">pw", "pw", false},
		{"on with password", "on >pw", "pw", true},
		{"wrong password", "on >pw", "pw2", false},
		{"no password is no login", "on", "", false},
		{"nopass takes anything", "on nopass", "whatever", true},
		{"password clears nopass", "on nopass >pw", "other", false},
		{"hash", "on #" + digest("pw"), "pw", true},
		{"second password", "on >a >b", "b", true},
		{"removed password", "on >a >b <b", "b", false},
		{"removed hash", "on >a !" + digest("a"), "a", false},
		{"resetpass", "on >a resetpass", "a", false},
		{"reset", "on >a reset", "a", false},
		{"off after on", "on >a off", "a", false},
		{"keywords in any case", "ON >pw", "pw", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Parse("f", []byte("user u "+tt.rules))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			u, ok := l.Authenticate([]byte("u"), []byte(tt.pass))
			if ok != tt.wantAuth || (u != nil) != tt.wantAuth {
				t.Errorf("Authenticate(u, %q) = %v, %v; want ok %v", tt.pass, u, ok, tt.wantAuth)
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	l := sampleList(t)
	tests := []struct {
		user, pass string
		want       bool
	}{
		{"acme", "acme-secret", true},
		{"acme", "beta-secret", false},
		{"beta", "beta-secret", true},
		{"beta", "second", true},
		{"off-user", "x", false},
		{"open", "", true},
		{"open", "anything", true},
		{"nobody", "acme-secret", false},
		{"default", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		u, ok := l.Authenticate([]byte(tt.user), []byte(tt.pass))
		if ok != tt.want {
			t.Errorf("Authenticate(%q, %q) ok = %v, want %v", tt.user, tt.pass, ok, tt.want)
		}
		if ok && u.Name() != tt.user {
			t.Errorf("Authenticate(%q) = user %q", tt.user, u.Name())
		}
	}
	if l.Default() != nil {
		t.Errorf("Default() = %v for a file without a default user, want nil", l.Default())
	}
}

func TestCheck(t *testing.T) {
	l := sampleList(t)
	tests := []struct {
		user, cmd string
		keys      []string
		want      string // "" allowed, else the Denied reason
		object    string
	}{
		{"acme", "rl.take", []string{"acme:x"}, "", ""},
		{"acme", "rl.take", []string{"beta:x"}, ReasonKey, "beta:x"},
		{"acme", "rl.mtake", []string{"acme:a", "beta:b"}, ReasonKey, "beta:b"},
		{"acme", "rl.acquire", []string{"acme:job"}, "", ""},
		{"acme", "rl.adjust", []string{"acme:x"}, ReasonCommand, "rl.adjust"},
		{"acme", "rl.reset", []string{"acme:x"}, ReasonCommand, "rl.reset"},
		{"acme", "rl.policy|set", nil, ReasonCommand, "rl.policy|set"},
		{"acme", "ping", nil, "", ""},
		{"acme", "client|setinfo", nil, "", ""},
		{"acme", "client|list", nil, ReasonCommand, "client|list"},
		{"acme", "acl|whoami", nil, "", ""},
		{"acme", "acl|list", nil, ReasonCommand, "acl|list"},
		{"acme", "info", nil, ReasonCommand, "info"},
		{"acme", "rl.nosuch", nil, ReasonCommand, "rl.nosuch"},
		{"beta", "rl.mtake", []string{"beta:a"}, ReasonCommand, "rl.mtake"},
		{"beta", "rl.peek", []string{"shared:a"}, "", ""},
		{"beta", "rl.take", []string{"shared:a"}, ReasonKey, "shared:a"},
		{"ops", "rl.policy|set", nil, "", ""},
		{"ops", "rl.reset", []string{"any"}, ReasonCommand, "rl.reset"},
		{"ops", "acl|load", nil, "", ""},
		{"open", "rl.take", []string{"open:1"}, "", ""},
		{"open", "rl.peek", []string{"open:1"}, ReasonCommand, "rl.peek"},
	}
	for _, tt := range tests {
		u := l.User(tt.user)
		var keys [][]byte
		for _, k := range tt.keys {
			keys = append(keys, []byte(k))
		}
		err := u.Check(tt.cmd, keys...)
		var got, obj string
		if d, ok := err.(*Denied); ok {
			got, obj = d.Reason, d.Object
		} else if err != nil {
			t.Fatalf("Check: %T %v", err, err)
		}
		if got != tt.want || obj != tt.object {
			t.Errorf("%s: Check(%s %q) = %q %q, want %q %q", tt.user, tt.cmd, tt.keys, got, obj, tt.want, tt.object)
		}
	}
}

func TestDeniedText(t *testing.T) {
	tests := []struct {
		d    Denied
		want string
	}{
		{Denied{User: "acme", Reason: ReasonCommand, Object: "rl.reset"}, "NOPERM User acme has no permissions to run the 'rl.reset' command"},
		{Denied{User: "acme", Reason: ReasonKey, Object: "beta:x"}, "NOPERM No permissions to access a key"},
	}
	for _, tt := range tests {
		if got := tt.d.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestFromFlags(t *testing.T) {
	tests := []struct {
		name            string
		require, admin  string
		user, pass, cmd string
		wantAuth        bool
		wantRun         bool
	}{
		{"open default takes", "", "", "default", "", "rl.take", true, true},
		{"open default admin cmds without admin-pass", "", "", "default", "x", "rl.reset", true, true},
		{"requirepass", "pw", "", "default", "pw", "rl.take", true, true},
		{"requirepass wrong", "pw", "", "default", "nope", "", false, false},
		{"requirepass default admin cmds without admin-pass", "pw", "", "default", "pw", "rl.policy|set", true, true},
		{"admin-pass: default may not reset", "pw", "ad", "default", "pw", "rl.reset", true, false},
		{"admin-pass: default may not ACL LIST", "pw", "ad", "default", "pw", "acl|list", true, false},
		{"admin-pass: default keeps CLIENT LIST", "pw", "ad", "default", "pw", "client|list", true, true},
		{"admin-pass: default keeps INFO", "", "ad", "default", "", "info", true, true},
		{"admin resets", "pw", "ad", "admin", "ad", "rl.reset", true, true},
		{"admin wrong password", "pw", "ad", "admin", "pw", "", false, false},
		{"no admin without admin-pass", "pw", "", "admin", "", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := FromFlags(tt.require, tt.admin)
			u, ok := l.Authenticate([]byte(tt.user), []byte(tt.pass))
			if ok != tt.wantAuth {
				t.Fatalf("Authenticate ok = %v, want %v", ok, tt.wantAuth)
			}
			if ok && u.CanRun(tt.cmd) != tt.wantRun {
				t.Errorf("CanRun(%s) = %v, want %v", tt.cmd, !tt.wantRun, tt.wantRun)
			}
			if ok && !u.CanKey([]byte("any:key")) {
				t.Errorf("CanKey(any:key) = false")
			}
			if got := l.Default() != nil; got != (tt.require == "") {
				t.Errorf("Default() set = %v with requirepass %q", got, tt.require)
			}
		})
	}
}

func TestEveryCommandHasACategory(t *testing.T) {
	for name, s := range commands {
		if !slices.Contains(categoryNames, s.cat) {
			t.Errorf("%s: category %q is not one of %q", name, s.cat, categoryNames)
		}
	}
	if got := CommandsIn("nosuch"); got != nil {
		t.Errorf("CommandsIn(nosuch) = %q", got)
	}
	if got, want := len(CommandsIn(CatAll)), len(commands); got != want {
		t.Errorf("CommandsIn(all) has %d commands, want %d", got, want)
	}
}

func TestLog(t *testing.T) {
	l := NewLog(3)
	t0 := time.Unix(1000, 0)
	add := func(obj string, at time.Duration) {
		l.Add(Entry{Reason: ReasonKey, Context: "toplevel", Object: obj, Username: "acme"}, t0.Add(at))
	}
	add("a", 0)
	add("a", time.Second)    // merged
	add("b", 2*time.Second)  // new
	add("a", 3*time.Second)  // merged, moves to the front
	add("a", 70*time.Second) // more than a minute after the last: new
	add("c", 71*time.Second)
	add("d", 72*time.Second) // the oldest falls off
	var got []string
	for _, e := range l.Entries(-1) {
		got = append(got, e.Object+":"+string(rune('0'+e.Count)))
	}
	if want := []string{"d:1", "c:1", "a:1"}; !slices.Equal(got, want) {
		t.Errorf("entries = %q, want %q", got, want)
	}
	l2 := NewLog(10)
	l2.Add(Entry{Reason: ReasonKey, Object: "a"}, t0)
	l2.Add(Entry{Reason: ReasonKey, Object: "b"}, t0)
	l2.Add(Entry{Reason: ReasonKey, Object: "a"}, t0.Add(time.Second))
	es := l2.Entries(-1)
	if len(es) != 2 || es[0].Object != "a" || es[0].Count != 2 || es[0].Created != t0 || es[0].Updated != t0.Add(time.Second) {
		t.Errorf("merged entry = %+v", es)
	}
	if got := len(l2.Entries(1)); got != 1 {
		t.Errorf("Entries(1) has %d", got)
	}
	l2.Reset()
	if got := len(l2.Entries(-1)); got != 0 {
		t.Errorf("after Reset: %d entries", got)
	}
}

func TestHolder(t *testing.T) {
	a, b := FromFlags("", ""), FromFlags("pw", "")
	h := NewHolder(a)
	if h.Users() != a {
		t.Fatal("Users() is not the list given")
	}
	h.Store(b)
	if h.Users() != b {
		t.Fatal("Users() after Store is not the new list")
	}
	if h.Log() == nil {
		t.Fatal("no Log")
	}
}
