package envoycfg

import "testing"

// The text of an Error in each of its forms; a line without a file is not
// written.
func TestErrorText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		e    Error
		want string
	}{
		{Error{File: "edge.yaml", Line: 7, Path: "descriptors[1].rate_limit.unitt", Msg: "unknown field"}, "edge.yaml:7: descriptors[1].rate_limit.unitt: unknown field"},
		{Error{File: "edge.yaml", Msg: "bad"}, "edge.yaml: bad"},
		{Error{Line: 3, Path: "domain", Msg: "bad"}, "domain: bad"},
		{Error{Msg: "bad"}, "bad"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.e, got, c.want)
		}
	}
}
