// Package httpfront is sluice's HTTP door: a JSON and 429 interface onto the
// same limiter as the RESP front end (same policies, store, failure
// policies and hot-key paths), on net/http.
//
//	POST /v1/take            {"key": "k", "cost": 1} or a batch [{…}, …]
//	                         → the six fields of RL.TAKE as JSON, 200 either way
//	GET|POST /v1/check?key=k&cost=1
//	                         → 200 allowed, 429 rejected, with RateLimit-Policy,
//	                           RateLimit and Retry-After (draft-ietf-httpapi-
//	                           ratelimit-headers), usable as nginx auth_request
//	                           or Traefik forwardAuth (the key from a header)
//	POST /v1/adjust          {"key": "k", "delta": -5}: RL.ADJUST
//	                         → the six fields as JSON, 200
//
// It must not know how decisions are made: it parses, asks its Decider
// once per HTTP request (a batch in one call), and writes the answer. It
// never panics on input and never buffers more than its configured limits.
package httpfront
