package httpfront

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluice-rl/sluice/internal/edge"
	"github.com/sluice-rl/sluice/limit"
)

// answer is what a route returns; write is the one function that sends it.
type answer struct {
	status int
	header http.Header // added to the response; may be nil
	body   any         // encoded as JSON
}

// errorBody is the JSON body of every error status.
type errorBody struct {
	Error string `json:"error"`
}

// itemError is one failed item of a batch answer.
type itemError struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
}

// resultBody is the six fields of the RL.TAKE reply.
type resultBody struct {
	Allowed      bool   `json:"allowed"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ResetAfterMs int64  `json:"reset_after_ms"`
	DecidedBy    string `json:"decided_by"`
}

func bodyOf(r *limit.Result) resultBody {
	return resultBody{Allowed: r.Allowed, Limit: r.Limit, Remaining: r.Remaining,
		RetryAfterMs: r.RetryAfterMs, ResetAfterMs: r.ResetAfterMs, DecidedBy: r.DecidedBy}
}

// takeBody is the answer of one take of /v1/take: the six fields, and the
// receipt when the take asked for one ("receipt": true; see adjust.go).
func takeBody(req *limit.Request, r *limit.Result) any {
	if req.WantReceipt {
		return receiptBody{bodyOf(r), r.Receipt}
	}
	return bodyOf(r)
}

func fail(status int, msg string) answer {
	return answer{status: status, body: errorBody{Error: msg}}
}

// ServeHTTP answers one request: /v1/take, /v1/check, or an error status.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Tracer != nil {
		s.serveTraced(w, r)
		return
	}
	write(w, r, s.route(w, r))
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) answer {
	r, bad := s.authenticate(r)
	if bad != nil {
		return *bad
	}
	switch r.URL.Path {
	case "/v1/take":
		if r.Method != http.MethodPost {
			return notAllowed("POST")
		}
		return s.take(w, r)
	case "/v1/check":
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
			return notAllowed("GET, HEAD, POST")
		}
		return s.check(r)
	case "/v1/adjust":
		if r.Method != http.MethodPost {
			return notAllowed("POST")
		}
		return s.adjust(w, r)
	case "/v1/acquire", "/v1/release": // concurrency policies (acquire.go)
		if r.Method != http.MethodPost {
			return notAllowed("POST")
		}
		if r.URL.Path == "/v1/acquire" {
			return s.acquire(w, r)
		}
		return s.release(w, r)
	}
	return fail(http.StatusNotFound, "no such endpoint: use POST /v1/take, GET|POST /v1/check, POST /v1/adjust, POST /v1/acquire or POST /v1/release")
}

func notAllowed(allow string) answer {
	a := fail(http.StatusMethodNotAllowed, "method not allowed; use "+allow)
	a.header = http.Header{"Allow": {allow}}
	return a
}

// takeItem is one request of POST /v1/take. A missing or null cost is 1.
type takeItem struct {
	Key     *string   `json:"key"`
	Cost    *jsonCost `json:"cost"`
	Receipt bool      `json:"receipt"` // true: RL.TAKE … RECEIPT
}

// jsonCost is a cost written as a JSON integer: digits only, positive,
// within int64. 1.0, 1e3, "1" and -1 are refused, as RESP refuses them.
type jsonCost int64

func (c *jsonCost) UnmarshalJSON(b []byte) error {
	return parseJSONInt(c, b, edge.ParseCost[[]byte], edge.ErrCost)
}

// parseJSONInt is the UnmarshalJSON of an integer field (jsonCost,
// jsonDelta): b read by parse, the RESP door's parser of the same
// argument, into *dst, or bad, the door's error, when parse refuses it.
func parseJSONInt[T ~int64](dst *T, b []byte, parse func([]byte) (int64, bool), bad error) error {
	n, ok := parse(b)
	if !ok {
		return bad
	}
	*dst = T(n)
	return nil
}

// take answers POST /v1/take: one object, or an array decided as one batch.
func (s *Server) take(w http.ResponseWriter, r *http.Request) answer {
	body, bad := s.readBody(w, r)
	if bad != nil {
		return *bad
	}
	body = bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(body) > 0 && body[0] == '{':
		var item takeItem
		if err := decodeStrict(body, &item); err != nil {
			return fail(http.StatusBadRequest, err.Error())
		}
		req, err := s.request(item)
		if err != nil {
			return fail(http.StatusBadRequest, err.Error())
		}
		if no := s.permit(r, "rl.take", req.Key); no != nil {
			return *no
		}
		reqs, out := []limit.Request{req}, make([]limit.Result, 1)
		s.decide(r, reqs, out)
		if out[0].Err != nil {
			return fail(errorStatus(out[0].Err), out[0].Err.Error())
		}
		return answer{status: http.StatusOK, body: takeBody(&reqs[0], &out[0])}
	case len(body) > 0 && body[0] == '[':
		var items []takeItem
		if err := decodeStrict(body, &items); err != nil {
			return fail(http.StatusBadRequest, err.Error())
		}
		if len(items) > s.cfg.MaxBatch {
			return fail(http.StatusRequestEntityTooLarge, "a batch holds at most "+strconv.Itoa(s.cfg.MaxBatch)+" requests, got "+strconv.Itoa(len(items)))
		}
		reqs := make([]limit.Request, len(items))
		keys := make([]string, len(items))
		for i, it := range items {
			var err error
			if reqs[i], err = s.request(it); err != nil {
				return fail(http.StatusBadRequest, "request "+strconv.Itoa(i)+": "+err.Error())
			}
			keys[i] = reqs[i].Key
		}
		if no := s.permit(r, "rl.take", keys...); no != nil { // the whole batch
			return *no
		}
		out := make([]limit.Result, len(reqs))
		if len(reqs) > 0 {
			s.decide(r, reqs, out)
		}
		items2 := make([]any, len(out))
		for i := range out {
			if out[i].Err != nil {
				items2[i] = itemError{Error: out[i].Err.Error(), Status: errorStatus(out[i].Err)}
			} else {
				items2[i] = takeBody(&reqs[i], &out[i])
			}
		}
		return answer{status: http.StatusOK, body: items2}
	}
	return fail(http.StatusBadRequest, `body must be a JSON object {"key": "...", "cost": 1} or an array of them`)
}

// decodeStrict decodes exactly one JSON value into v, refusing unknown
// fields (a misspelt "cost" would otherwise silently cost 1) and anything
// after the value.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, edge.ErrCost) {
			return edge.ErrCost
		}
		if errors.Is(err, edge.ErrDelta) {
			return edge.ErrDelta
		}
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			return errors.New("bad JSON: field " + strconv.Quote(ute.Field) + " must be a " + jsonKind(ute.Field))
		}
		return errors.New("bad JSON: " + err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("bad JSON: more data after the request")
	}
	return nil
}

func jsonKind(field string) string {
	if field == "cost" || len(field) > 5 && field[len(field)-5:] == ".cost" {
		return "positive integer"
	}
	return "string"
}

// request validates one item of POST /v1/take.
func (s *Server) request(it takeItem) (limit.Request, error) {
	if it.Key == nil {
		return limit.Request{}, errors.New(`"key" is required`)
	}
	if err := s.keys.Check(*it.Key); err != nil {
		return limit.Request{}, err
	}
	cost := int64(1)
	if it.Cost != nil {
		cost = int64(*it.Cost)
	}
	return limit.Request{Key: *it.Key, Cost: cost, Op: limit.OpTake, WantReceipt: it.Receipt}, nil
}

// check answers GET|HEAD|POST /v1/check: 200 when allowed, 429 when not,
// with the RateLimit headers either way. The key is the query's key, else
// the KeyHeader header; a POST body is not read.
func (s *Server) check(r *http.Request) answer {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return fail(http.StatusBadRequest, "bad query: "+err.Error())
	}
	key, err := s.checkKeyOf(q, r.Header)
	if err != nil {
		return fail(http.StatusBadRequest, err.Error())
	}
	cost := int64(1)
	if vs, ok := q["cost"]; ok {
		var ok bool
		if len(vs) != 1 {
			return fail(http.StatusBadRequest, "cost given more than once")
		}
		if cost, ok = edge.ParseCost(vs[0]); !ok {
			return fail(http.StatusBadRequest, edge.ErrCost.Error())
		}
	}
	legacy := false
	if vs, ok := q["legacy"]; ok {
		switch {
		case len(vs) != 1:
			return fail(http.StatusBadRequest, "legacy given more than once")
		case vs[0] == "1" || vs[0] == "true":
			legacy = true
		case vs[0] == "0" || vs[0] == "false":
		default:
			return fail(http.StatusBadRequest, "legacy must be 1, true, 0 or false")
		}
	}
	if no := s.permit(r, "rl.take", key); no != nil {
		return *no
	}
	reqs := []limit.Request{{Key: key, Cost: cost, Op: limit.OpTake}}
	out := make([]limit.Result, 1)
	s.decide(r, reqs, out)
	res := &out[0]
	if res.Err != nil {
		return fail(errorStatus(res.Err), res.Err.Error())
	}
	a := answer{status: http.StatusOK, header: http.Header{}, body: bodyOf(res)}
	if !res.Allowed {
		a.status = http.StatusTooManyRequests
	}
	decisionHeaders(a.header, reqs[0].Policy, res, legacy)
	return a
}

// checkKeyOf is the key of /v1/check: the query's, else the header's.
func (s *Server) checkKeyOf(q url.Values, h http.Header) (string, error) {
	var key string
	if vs, ok := q["key"]; ok {
		if len(vs) != 1 {
			return "", errors.New("key given more than once")
		}
		key = vs[0]
	} else {
		vs := h.Values(s.cfg.KeyHeader)
		switch len(vs) {
		case 0:
			return "", errors.New("no key: give ?key= or the " + s.cfg.KeyHeader + " header")
		case 1:
			key = vs[0]
		default:
			return "", errors.New(s.cfg.KeyHeader + " given more than once")
		}
	}
	return key, s.keys.Check(key)
}

// decide asks the Decider; it bounds the store call by its own deadline.
func (s *Server) decide(r *http.Request, reqs []limit.Request, out []limit.Result) {
	for i := range reqs {
		if reqs[i].WantReceipt || reqs[i].Receipt != "" {
			reqs[i].User = userName(r) // a receipt is its user's (limit.BindReceipt)
		}
	}
	// r.Context() carries the front "http" (Server's BaseContext).
	s.cfg.Decider.Decide(r.Context(), reqs, out)
}

// errorStatus maps a decision error to its status: no policy 404, the
// store unavailable 503 (the limiter normally answers those by the
// policy's on_store_error), a command that does not apply to the policy's
// algorithm 400, anything else (an error Redis returned, a
// malformed reply) 500.
func errorStatus(err error) int {
	switch {
	case errors.Is(err, limit.ErrNoPolicy):
		return http.StatusNotFound
	case errors.Is(err, limit.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, limit.ErrWrongAlgorithm), errors.Is(err, edge.ErrTTL), errors.Is(err, limit.ErrSlotTTL):
		return http.StatusBadRequest
	case errors.Is(err, limit.ErrReceipt):
		return receiptStatus(err)
	}
	return http.StatusInternalServerError
}

// write sends a: its headers, the status, and the body as JSON (not for
// HEAD). Decisions and errors alike are never cached.
func write(w http.ResponseWriter, r *http.Request, a answer) {
	h := w.Header()
	for k, vs := range a.header {
		h[k] = vs
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	b, err := json.Marshal(a.body)
	if err != nil { // every body is one of our own structs: a bug
		a.status, b = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	b = append(b, '\n')
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(a.status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}
