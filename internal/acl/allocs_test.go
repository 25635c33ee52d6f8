package acl

import "testing"

// The per-command check is on RL.TAKE's path: it must not allocate, with
// key patterns as with allkeys.
func TestCheckDoesNotAllocate(t *testing.T) {
	l, err := Parse("users.acl", []byte("user acme on >pw ~acme:* ~{acme}* +@limit\nuser ops on >pw ~* +@all\n"))
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("acme:login:42")
	for _, name := range []string{"acme", "ops"} {
		u := l.User(name)
		if u == nil {
			t.Fatalf("no user %s", name)
		}
		n := testing.AllocsPerRun(1000, func() {
			if !u.CanRun("rl.take") || !u.CanAccess(key, KeyAccess("rl.take")|ReadWrite) {
				t.Fatal("refused")
			}
		})
		if n != 0 {
			t.Errorf("%s: the check of RL.TAKE allocates %v times, want 0", name, n)
		}
	}
}
