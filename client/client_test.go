package client

import (
	"context"
	"errors"
	"go/parser"
	"go/token"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// canned is a Doer that answers every command with one reply: for the
// shapes a live sluice never sends (the live replies are the examples').
type canned struct {
	val any
	err error
}

func (c canned) Do(ctx context.Context, args ...any) *redis.Cmd {
	return redis.NewCmdResult(c.val, c.err)
}

func TestMalformedRepliesAreErrors(t *testing.T) {
	six := []any{int64(1), int64(5), int64(4), int64(-1), int64(200), "store"}
	for _, tc := range []struct {
		name string
		val  any
	}{
		{"empty array", []any{}},
		{"five fields", six[:5]},
		{"text where an integer goes", []any{"1", int64(5), int64(4), int64(-1), int64(200), "store"}},
		{"integer where decided_by goes", []any{int64(1), int64(5), int64(4), int64(-1), int64(200), int64(0)}},
		{"not an array", int64(1)},
	} {
		c := New(canned{val: tc.val})
		if _, err := c.Take(t.Context(), "k", 1); err == nil || !strings.Contains(err.Error(), "RL.TAKE") {
			t.Errorf("Take, %s: %v, want an error naming RL.TAKE", tc.name, err)
		}
		if _, _, err := c.MTake(t.Context(), Rule{"k", 1}); err == nil {
			t.Errorf("MTake, %s: no error", tc.name)
		}
		if _, err := c.Acquire(t.Context(), "k", 0); err == nil {
			t.Errorf("Acquire, %s: no error", tc.name)
		}
	}
	if _, err := New(canned{val: append(six, int64(7))}).Acquire(t.Context(), "k", 0); err == nil {
		t.Error("Acquire with an integer token: no error")
	}
	if _, _, err := New(canned{val: []any{int64(1), []any{six, six}}}).MTake(t.Context(), Rule{"k", 1}); err == nil {
		t.Error("MTake with two replies for one rule: no error")
	}
}

func TestDecisionFields(t *testing.T) {
	for _, tc := range []struct {
		val  []any
		want Decision
	}{
		{[]any{int64(1), int64(5), int64(4), int64(-1), int64(200), "store"},
			Decision{Allowed: true, Limit: 5, Remaining: 4, ResetAfter: 200 * time.Millisecond, DecidedBy: "store"}},
		{[]any{int64(0), int64(5), int64(0), int64(1500), int64(3000), "deny-cache"},
			Decision{Limit: 5, RetryAfter: 1500 * time.Millisecond, ResetAfter: 3 * time.Second, DecidedBy: "deny-cache"}},
		{[]any{int64(0), int64(5), int64(5), int64(-1), int64(0), "store"},
			Decision{Limit: 5, Remaining: 5, Never: true, DecidedBy: "store"}},
	} {
		got, err := New(canned{val: tc.val}).Take(t.Context(), "k", 1)
		if err != nil || got != tc.want {
			t.Errorf("%v: %+v, %v; want %+v", tc.val, got, err, tc.want)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		reply string
		want  error
	}{
		{"ERR no policy matches key 'x'", ErrNoPolicy},
		{"ERR cost must be a positive integer", ErrInvalid},
		{"ERR wrong number of arguments for 'rl.take' command", ErrInvalid},
		{"ERR value is not an integer or out of range", ErrInvalid},
		{"NOAUTH Authentication required.", ErrAuth},
		{"ERR rl.take does not apply to concurrency policy 'r': use RL.ACQUIRE and RL.RELEASE", ErrNotApplicable},
		{"ERR RL.ADJUST is not supported for policy 'g': scope: global budgets are spent through region pools; adjust is regional only", ErrNotApplicable},
		{"WRONGPASS invalid username-password pair or user is disabled.", ErrAuth},
	} {
		_, err := New(canned{err: redisError(tc.reply)}).Take(t.Context(), "k", 1)
		var e *Error
		if !errors.As(err, &e) || e.Msg != tc.reply || !errors.Is(err, tc.want) {
			t.Errorf("%q: %v, want an *Error that is %v", tc.reply, err, tc.want)
		}
		for _, other := range []error{ErrNoPolicy, ErrInvalid, ErrAuth, ErrNotApplicable} {
			if other != tc.want && errors.Is(err, other) {
				t.Errorf("%q is also %v", tc.reply, other)
			}
		}
	}
	netErr := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	_, err := New(canned{err: netErr}).Take(t.Context(), "k", 1)
	var e *Error
	if !errors.Is(err, netErr) || errors.As(err, &e) {
		t.Errorf("a connection error came back as %v, want it unchanged", err)
	}
	if _, _, err := New(canned{}).MTake(t.Context()); !errors.Is(err, ErrInvalid) {
		t.Errorf("MTake of no rules: %v, want ErrInvalid", err)
	}
}

// redisError is an error reply as go-redis reports one.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

// TestImportsStayLean: a service that links the client gets go-redis and
// this package, nothing of sluice's server (doc.go).
func TestImportsStayLean(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if strings.Contains(path, ".") && path != "github.com/redis/go-redis/v9" {
				t.Errorf("%s imports %s", f, path)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no imports checked")
	}
}

// TestModuleNeedsGoRedisOnly: go.mod requires go-redis and nothing else
// directly, tests included (a test that imported a server package would
// put the server module here, and in every importer's module graph).
func TestModuleNeedsGoRedisOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{if not .Indirect}}{{.Path}}{{end}}", "all").Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	got := strings.Fields(string(out))
	want := []string{"github.com/sluice-rl/sluice/client", "github.com/redis/go-redis/v9"}
	if !slices.Equal(got, want) {
		t.Errorf("the module and its direct requirements are %v, want %v", got, want)
	}
}
