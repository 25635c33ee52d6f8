package policy

import "testing"

// The text of an Error in each of its forms: the file and line, the file
// alone, the line alone, neither.
func TestErrorText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		e    Error
		want string
	}{
		{Error{File: "s.yaml", Line: 7, Scope: `policy #2 "api"`, Field: "limit", Msg: "must be at least 1"}, `s.yaml:7: policy #2 "api": limit: must be at least 1`},
		{Error{File: "s.yaml", Scope: "defaults", Msg: "bad"}, "s.yaml: defaults: bad"},
		{Error{Line: 3, Field: "timeout", Msg: "bad"}, "line 3: timeout: bad"},
		{Error{Msg: "bad"}, "bad"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.e, got, c.want)
		}
	}
}
