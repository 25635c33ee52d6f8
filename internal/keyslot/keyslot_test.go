package keyslot

import "testing"

// Values from CLUSTER KEYSLOT of redis-server 7.0.15; the tag rows check
// the hash-tag rule against each other.
func TestSlot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want int
	}{
		{"", 0},
		{"123456789", 12739}, // 0x31C3, the CRC-16/XMODEM check value
		{"foo", 12182},
		{"bar", 5061},
		{"user1000", 3443},
		{"{user1000}.following", 3443},
		{"foo{}{bar}", 8363}, // empty tag: the whole key
		{"{unclosed", 470},
		{"foo{{bar}}zap", Slot("{bar")}, // the tag runs to the first '}'
		{"foo{bar}{zap}", 5061},         // the first tag only
	}
	for _, tt := range tests {
		if got := Slot(tt.key); got != tt.want {
			t.Errorf("Slot(%q) = %d, want %d", tt.key, got, tt.want)
		}
	}
}
