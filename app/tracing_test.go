package app

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestOTLPEndpoint: where traces go, by the flag, then the standard
// environment variables (the traces one as is, the generic one as a base
// URL), and what turns the environment's choice off.
func TestOTLPEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"off by default", nil, nil, ""},
		{"flag", []string{"--otlp-endpoint", "http://c:4318"}, nil, "http://c:4318"},
		{"traces variable", nil, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/v1/traces"}, "http://t:4318/v1/traces"},
		{"generic variable is a base", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://g:4318/"}, "http://g:4318/v1/traces"},
		{"traces variable over generic", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://g:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318/x"}, "http://t:4318/x"},
		{"flag over variables", []string{"--otlp-endpoint", "http://f:4318"}, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318"}, "http://f:4318"},
		{"SDK disabled", nil, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://g:4318", "OTEL_SDK_DISABLED": "true"}, ""},
		{"exporter none", nil, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:4318", "OTEL_TRACES_EXPORTER": "none"}, ""},
		{"a flag beats SDK disabled", []string{"--otlp-endpoint", "http://f:4318"}, map[string]string{"OTEL_SDK_DISABLED": "true"}, "http://f:4318"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.OTLPEndpoint; got != tc.want {
				t.Errorf("OTLPEndpoint = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTracesURL: the URL posted to, and a clear error for one that is not
// an http(s) URL.
func TestTracesURL(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{in: "http://127.0.0.1:4318", want: "http://127.0.0.1:4318/v1/traces"},
		{in: "https://otel.example:443/", want: "https://otel.example:443/v1/traces"},
		{in: "http://c:4318/custom/path", want: "http://c:4318/custom/path"},
		{in: "127.0.0.1:4318", err: "want an http:// or https:// URL"},
		{in: "grpc://c:4317", err: "want an http:// or https:// URL"},
		{in: "http://", err: "want an http:// or https:// URL"},
		{in: "http://c:4318/?x=1", err: "want an http:// or https:// URL"},
	} {
		got, err := tracesURL(tc.in)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("tracesURL(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("tracesURL(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// TestTracingBadConfig: New refuses a bad endpoint or ratio by name,
// before it opens anything.
func TestTracingBadConfig(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		ratio    float64
		want     string
	}{
		{"localhost:4318", 1, `--otlp-endpoint "localhost:4318"`},
		{"http://127.0.0.1:4318", 1.5, "--trace-sample-ratio 1.5: want a number from 0 to 1"},
		{"http://127.0.0.1:4318", -0.1, "--trace-sample-ratio -0.1"},
	} {
		cfg := Defaults()
		cfg.Admin, cfg.Listen = "", "127.0.0.1:0"
		cfg.OTLPEndpoint, cfg.TraceSampleRatio = tc.endpoint, tc.ratio
		a, err := New(context.Background(), cfg)
		if err == nil {
			a.Close()
			t.Errorf("New with %q, %v: no error, want %q", tc.endpoint, tc.ratio, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with %q, %v: %v, want %q", tc.endpoint, tc.ratio, err, tc.want)
		}
	}
}

// TestTracingBadResourceAttributes: a malformed OTEL_RESOURCE_ATTRIBUTES
// entry is said and dropped, and sluice starts, named sluice.
func TestTracingBadResourceAttributes(t *testing.T) {
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "novalue,team=edge")
	var log strings.Builder
	cfg := Defaults()
	cfg.Admin, cfg.Listen = "", "127.0.0.1:0"
	cfg.OTLPEndpoint = "http://127.0.0.1:1"
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	a, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer a.Close()
	if !strings.Contains(log.String(), `msg="tracing: resource attributes"`) {
		t.Errorf("no warning about the malformed entry:\n%s", log.String())
	}
}
