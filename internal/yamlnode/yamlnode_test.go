package yamlnode

import "testing"

func TestMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		file  string
		line  int
		parts []string
		want  string
	}{
		{"edge.yaml", 7, []string{"descriptors[1].rate_limit.unitt"}, "edge.yaml:7: descriptors[1].rate_limit.unitt: bad"},
		{"edge.yaml", 0, []string{""}, "edge.yaml: bad"},
		{"", 7, []string{`policy "api"`, "limit"}, `policy "api": limit: bad`},
		{"", 0, nil, "bad"},
		{"s.yaml", 3, []string{"", "timeout"}, "s.yaml:3: timeout: bad"},
	} {
		if got := Message(c.file, c.line, "bad", c.parts...); got != c.want {
			t.Errorf("Message(%q, %d, bad, %q) = %q, want %q", c.file, c.line, c.parts, got, c.want)
		}
	}
}
