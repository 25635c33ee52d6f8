package httpfront

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/sluice-rl/sluice/internal/edge"
	"github.com/sluice-rl/sluice/limit"
)

// SlotDecider is a Decider that also answers POST /v1/acquire and
// /v1/release (concurrency policies); the limiter implements it.
type SlotDecider interface {
	Acquire(ctx context.Context, key string, ttlMs int64) (limit.Result, string)
	Release(ctx context.Context, key, token string) (bool, error)
}

// acquireItem is the body of POST /v1/acquire. A missing ttl_ms is the
// policy's period.
type acquireItem struct {
	Key   *string  `json:"key"`
	TTLMs *jsonTTL `json:"ttl_ms"`
}

// jsonTTL is ttl_ms written as a JSON integer, as RL.ACQUIRE takes it.
type jsonTTL int64

func (v *jsonTTL) UnmarshalJSON(b []byte) error {
	n, err := edge.ParseTTL(b)
	if err != nil {
		return err
	}
	*v = jsonTTL(n)
	return nil
}

// releaseItem is the body of POST /v1/release.
type releaseItem struct {
	Key   *string `json:"key"`
	Token *string `json:"token"`
}

// acquireBody is RL.ACQUIRE's reply: the six fields and the token.
type acquireBody struct {
	resultBody
	Token string `json:"token"`
}

// releaseBody is RL.RELEASE's reply.
type releaseBody struct {
	Held bool `json:"held"`
}

// readBody reads a request body of at most MaxBodyBytes.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *answer) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		a := fail(http.StatusBadRequest, "reading the body: "+err.Error())
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			a = fail(http.StatusRequestEntityTooLarge, "request body is larger than "+strconv.FormatInt(s.cfg.MaxBodyBytes, 10)+" bytes")
		}
		return nil, &a
	}
	return body, nil
}

// acquire answers POST /v1/acquire {"key": k, "ttl_ms": n}: 200 with the
// decision and the slot's token ("" when refused).
func (s *Server) acquire(w http.ResponseWriter, r *http.Request) answer {
	var it acquireItem
	sd, bad := s.slotItem(w, r, &it)
	if bad != nil {
		return *bad
	}
	if it.Key == nil {
		return fail(http.StatusBadRequest, `"key" is required`)
	}
	if err := s.keys.Check(*it.Key); err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	if no := s.permit(r, "rl.acquire", *it.Key); no != nil {
		return *no
	}
	var ttl int64
	if it.TTLMs != nil {
		ttl = int64(*it.TTLMs)
	}
	res, token := sd.Acquire(r.Context(), *it.Key, ttl)
	if res.Err != nil {
		return fail(errorStatus(res.Err), res.Err.Error())
	}
	return answer{status: http.StatusOK, body: acquireBody{bodyOf(&res), token}}
}

// release answers POST /v1/release {"key": k, "token": t}: 200 with
// {"held": true} when the slot was held, false when the token is unknown
// (another key's included) or expired.
func (s *Server) release(w http.ResponseWriter, r *http.Request) answer {
	var it releaseItem
	sd, bad := s.slotItem(w, r, &it)
	if bad != nil {
		return *bad
	}
	switch {
	case it.Key == nil:
		return fail(http.StatusBadRequest, `"key" is required`)
	case it.Token == nil:
		return fail(http.StatusBadRequest, `"token" is required`)
	}
	if err := s.keys.Check(*it.Key); err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	if err := edge.CheckToken(*it.Token); err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	if no := s.permit(r, "rl.release", *it.Key); no != nil {
		return *no
	}
	held, err := sd.Release(r.Context(), *it.Key, *it.Token)
	if err != nil {
		return fail(errorStatus(err), err.Error())
	}
	return answer{status: http.StatusOK, body: releaseBody{held}}
}

// slotItem is the start of POST /v1/acquire and /v1/release: the
// server's SlotDecider (501 when its decider holds no slots), then the
// body read and decoded into it (decodeSlots; 400, 413).
func (s *Server) slotItem(w http.ResponseWriter, r *http.Request, it any) (SlotDecider, *answer) {
	sd, ok := s.cfg.Decider.(SlotDecider)
	if !ok {
		a := fail(http.StatusNotImplemented, "this server's decider holds no concurrency slots")
		return nil, &a
	}
	body, bad := s.readBody(w, r)
	if bad != nil {
		return nil, bad
	}
	if err := decodeSlots(body, it); err != nil {
		a := fail(http.StatusBadRequest, err.Error())
		return nil, &a
	}
	return sd, nil
}

// decodeSlots is decodeStrict, with ttl_ms's own error.
func decodeSlots(b []byte, v any) error {
	err := decodeStrict(b, v)
	if err != nil && errors.Is(err, edge.ErrTTL) {
		return edge.ErrTTL
	}
	return err
}
