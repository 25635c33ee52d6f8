package edge

import "testing"

func TestParseDelta(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1", 1, true}, {"-1", -1, true}, {"250", 250, true}, {"-250", -250, true},
		{"9007199254740991", MaxDelta, true}, {"-9007199254740991", -MaxDelta, true},
		{"9007199254740992", 0, false}, {"-9007199254740992", 0, false},
		{"", 0, false}, {"-", 0, false}, {"-0", 0, false}, {"+1", 0, false}, {"01", 0, false},
		{"1.5", 0, false}, {" 1", 0, false}, {"1e3", 0, false}, {"--1", 0, false},
		{"99999999999999999999", 0, false},
	} {
		got, ok := ParseDelta(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseDelta(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
