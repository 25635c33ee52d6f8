package envoycfg

import "testing"

func TestKey(t *testing.T) {
	tests := []struct {
		domain  string
		entries []Entry
		want    string
	}{
		{"edge", nil, "edge"},
		{"edge", []Entry{{"remote_address", "10.0.0.1"}}, "edge:remote_address=10.0.0.1"},
		{"edge", []Entry{{"remote_address", "::1"}, {"path", "/a=b%"}}, "edge:remote_address=%3A%3A1:path=/a%3Db%25"},
		{"a:b", []Entry{{"k", ""}}, "a%3Ab:k="},
	}
	for _, tt := range tests {
		if got := Key(tt.domain, tt.entries); got != tt.want {
			t.Errorf("Key(%q, %v) = %q, want %q", tt.domain, tt.entries, got, tt.want)
		}
	}
}

// Different descriptors never share a key.
func FuzzKeyInjective(f *testing.F) {
	f.Add("d", "k", "v", "d", "k:v", "")
	f.Add("a:b", "", "", "a", "b", "")
	f.Fuzz(func(t *testing.T, d1, k1, v1, d2, k2, v2 string) {
		a, b := Key(d1, []Entry{{k1, v1}}), Key(d2, []Entry{{k2, v2}})
		if a == b && (d1 != d2 || k1 != k2 || v1 != v2) {
			t.Fatalf("%q and %q share key %q", []string{d1, k1, v1}, []string{d2, k2, v2}, a)
		}
	})
}
