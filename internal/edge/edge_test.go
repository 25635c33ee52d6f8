package edge

import (
	"errors"
	"strings"
	"testing"
)

func TestParseCost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1", 1, true},
		{"42", 42, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"0", 0, false},
		{"01", 0, false},
		{"-1", 0, false},
		{"+1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1.0", 0, false},
		{"1e3", 0, false},
		{"abc", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseCost(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseCost(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
		gotB, okB := ParseCost([]byte(tt.in))
		if gotB != got || okB != ok {
			t.Errorf("ParseCost([]byte(%q)) = %d, %v; the string form says %d, %v", tt.in, gotB, okB, got, ok)
		}
	}
}

func TestKeys(t *testing.T) { // not parallel: AllocsPerRun
	k := NewKeys(4)
	tests := []struct {
		key  string
		want string // "" for nil
	}{
		{"a", ""},
		{"abcd", ""},
		{"", "key must not be empty"},
		{"abcde", "key is too long (max 4 bytes)"},
	}
	for _, tt := range tests {
		for _, err := range []error{k.Check(tt.key), k.CheckBytes([]byte(tt.key))} {
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("check %q = %q, want %q", tt.key, got, tt.want)
			}
		}
	}
	if !errors.Is(k.Check(""), ErrKeyEmpty) {
		t.Error("an empty key is not ErrKeyEmpty")
	}
	if k.MaxBytes() != 4 {
		t.Errorf("MaxBytes = %d, want 4", k.MaxBytes())
	}
	long := []byte(strings.Repeat("x", 5))
	if n := testing.AllocsPerRun(100, func() { _ = k.CheckBytes(long) }); n != 0 {
		t.Errorf("a refused key allocates %v times, want 0", n)
	}
}
