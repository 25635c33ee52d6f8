package httpfront

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/sluice-rl/sluice/internal/edge"
	"github.com/sluice-rl/sluice/limit"
)

// adjustItem is the body of POST /v1/adjust: {"key": "...", "delta": -5}.
type adjustItem struct {
	Key   *string    `json:"key"`
	Delta *jsonDelta `json:"delta"`
}

// jsonDelta is RL.ADJUST's delta written as a JSON integer (edge.ParseDelta):
// 5, -5 or 0; 1.0, 1e3 and "5" are refused, as RESP refuses them.
type jsonDelta int64

func (d *jsonDelta) UnmarshalJSON(b []byte) error {
	n, ok := edge.ParseDelta(b)
	if !ok {
		return edge.ErrDelta
	}
	*d = jsonDelta(n)
	return nil
}

// adjust answers POST /v1/adjust, RL.ADJUST key delta: 200 and the six
// fields of the take reply once the adjust is recorded (allowed false only
// when on_store_error closed answered, and nothing was recorded); 400 for a
// bad body or a policy that cannot be adjusted (scope: global).
func (s *Server) adjust(w http.ResponseWriter, r *http.Request) answer {
	body, bad := s.readBody(w, r)
	if bad != nil {
		return *bad
	}
	var item adjustItem
	if b := bytes.TrimLeft(body, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return fail(http.StatusBadRequest, `body must be a JSON object {"key": "...", "delta": -5}`)
	}
	if err := decodeStrict(body, &item); err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	switch {
	case item.Key == nil:
		return fail(http.StatusBadRequest, `"key" is required`)
	case item.Delta == nil:
		return fail(http.StatusBadRequest, `"delta" is required`)
	}
	if err := s.keys.Check(*item.Key); err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	if no := s.permit(r, "rl.adjust", *item.Key); no != nil {
		return *no
	}
	reqs := []limit.Request{{Key: *item.Key, Cost: int64(*item.Delta), Op: limit.OpAdjust}}
	out := make([]limit.Result, 1)
	s.decide(r, reqs, out)
	if err := out[0].Err; err != nil {
		status := errorStatus(err)
		if errors.Is(err, limit.ErrNotAdjustable) {
			status = http.StatusBadRequest
		}
		return fail(status, err.Error())
	}
	return answer{status: http.StatusOK, body: bodyOf(&out[0])}
}
