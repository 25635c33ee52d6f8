package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// httpCaller is GET /v1/check?key=…&cost=1 on a keep-alive connection of
// its own: 200 (admitted) and 429 (rejected) are both decisions.
type httpCaller struct {
	c    *http.Client
	base string
}

func dialHTTP(addr string) (caller, error) {
	return httpCaller{c: keepAlive(), base: "http://" + addr + "/v1/check?cost=1&key="}, nil
}

// keepAlive is an HTTP client of one keep-alive connection: a caller's
// own, one request in flight.
func keepAlive() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1, IdleConnTimeout: time.Minute, DisableCompression: true}}
}

func (h httpCaller) take(ctx context.Context, key string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+url.QueryEscape(key), nil)
	if err != nil {
		return err
	}
	resp, err := h.c.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
		return fmt.Errorf("GET /v1/check: %s", resp.Status)
	}
	return nil
}

func (h httpCaller) close() { h.c.CloseIdleConnections() }
