package httpfront

import (
	"bytes"
	"errors"
	"net/http"

	"github.com/sluice-rl/sluice/internal/edge"
	"github.com/sluice-rl/sluice/limit"
)

// adjustItem is the body of POST /v1/adjust: {"key": "...", "delta": -5,
// "receipt": "..."}; a negative delta needs the receipt of a take on the
// key (POST /v1/take with "receipt": true).
type adjustItem struct {
	Key     *string    `json:"key"`
	Delta   *jsonDelta `json:"delta"`
	Receipt string     `json:"receipt"`
}

// receiptBody is the answer of a take that asked for a receipt: the six
// fields and the receipt ("" when refused or answered without the store).
type receiptBody struct {
	resultBody
	Receipt string `json:"receipt"`
}

// receiptStatus is the status of a give-back refused for its receipt
// (limit.ErrReceipt): 409 Conflict for a receipt that is not, or no
// longer, one of this key's (used, expired, forged, another key's or
// policy's), 400 for a request that could never be right (no receipt,
// more than the take's cost).
func receiptStatus(err error) int {
	if errors.Is(err, limit.ErrReceiptInvalid) || errors.Is(err, limit.ErrReceiptPolicy) {
		return http.StatusConflict
	}
	return http.StatusBadRequest
}

// jsonDelta is RL.ADJUST's delta written as a JSON integer (edge.ParseDelta):
// 5, -5 or 0; 1.0, 1e3 and "5" are refused, as RESP refuses them.
type jsonDelta int64

func (d *jsonDelta) UnmarshalJSON(b []byte) error {
	return parseJSONInt(d, b, edge.ParseDelta[[]byte], edge.ErrDelta)
}

// adjust answers POST /v1/adjust, RL.ADJUST key delta [receipt]: 200 and
// the six fields of the take reply once the adjust is recorded (allowed
// false only when the store could not answer, and nothing was recorded);
// 400 for a bad body, a policy that cannot be adjusted (scope: global), a
// give-back without a receipt or of more than its take; 409 for a receipt
// that is not one of this key's in force (receiptStatus).
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
	reqs := []limit.Request{{Key: *item.Key, Cost: int64(*item.Delta), Op: limit.OpAdjust, Receipt: item.Receipt}}
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
