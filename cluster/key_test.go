package cluster

import "testing"

func TestKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ user, want string }{
		{"acme", "sluice:{acme}"},
		{"{acme}:login", "sluice:{acme}:login"},
		{"login:{acme}", "sluice:login:{acme}"},
		{"a{}b", "sluice:{a{}b}"}, // empty tag: the whole key is hashed
		{"a{b", "sluice:{a{b}"},
		{"", "sluice:{}"},
	}
	for _, tt := range tests {
		if got := Key(tt.user); got != tt.want {
			t.Errorf("Key(%q) = %q, want %q", tt.user, got, tt.want)
		}
	}
}
