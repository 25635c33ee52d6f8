package app

import "testing"

// TestRedactURL: the URL a log line shows keeps all but the password.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"redis://127.0.0.1:6379", "redis://127.0.0.1:6379"},
		{"redis://default:pw-Xy12@127.0.0.1:6379/0", "redis://default:xxxxx@127.0.0.1:6379/0"},
		{"rediss://:pw-Xy12@h:1", "rediss://:xxxxx@h:1"},
		{"redis://bob:p@ss-Xy12@h:1", "redis://bob:xxxxx@h:1"},
		{"redis://bob@h:1", "redis://bob@h:1"},
		{"redis://bob:pw-Xy12@[::1", "redis://bob:xxxxx@[::1"}, // does not parse
	} {
		if got := redactURL(tc.in); got != tc.want {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
