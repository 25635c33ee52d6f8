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

func TestSlotKnownValues(t *testing.T) {
	t.Parallel()
	// Values from the Redis Cluster specification and CLUSTER KEYSLOT.
	tests := []struct {
		key  string
		want int
	}{
		{"123456789", 12739}, // CRC16/XMODEM check value 0x31C3
		{"foo", 12182},
	}
	for _, tt := range tests {
		if got := Slot(tt.key); got != tt.want {
			t.Errorf("Slot(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
}
