package httpfront

import (
	"encoding/json"
	"strings"
	"testing"
)

// POST /v1/adjust: the take reply's six fields, a debt that refuses the
// next take, a give-back that admits again with the take's receipt, and
// the errors. {r} is the receipt of the first take.
func TestAdjust(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	steps := []struct {
		path, body string
		status     int
		want       string
	}{
		{"/v1/take", `{"key": "three:a", "cost": 2, "receipt": true}`, 200, `"remaining":1,`},
		{"/v1/adjust", `{"key": "three:a", "delta": 3}`, 200, `{"allowed":true,"limit":3,"remaining":0,"retry_after_ms":-1,"reset_after_ms":5000,"decided_by":"embedded"}`},
		{"/v1/take", `{"key": "three:a"}`, 200, `"allowed":false,`},
		{"/v1/take", `{"key": "three:a", "receipt": true}`, 200, `"allowed":false,"limit":3,"remaining":0,"retry_after_ms":3000,"reset_after_ms":5000,"decided_by":"embedded","receipt":""}`},
		{"/v1/adjust", `{"key": "three:a", "delta": -3}`, 400, `{"error":"a negative delta gives back a take: name its receipt`},
		{"/v1/adjust", `{"key": "three:a", "delta": -3, "receipt": "{r}"}`, 400, `{"error":"delta exceeds the cost of the receipt's take"}`},
		{"/v1/adjust", `{"key": "three:a", "delta": -2, "receipt": "0123456789abcdef0123456789abcdef"}`, 409, `{"error":"invalid, expired or already used receipt"}`},
		{"/v1/adjust", `{"key": "three:a", "delta": -2, "receipt": "{r}"}`, 200, `"remaining":0,`},
		{"/v1/adjust", `{"key": "three:a", "delta": -2, "receipt": "{r}"}`, 409, `{"error":"invalid, expired or already used receipt"}`},
		{"/v1/adjust", `{"key": "three:a", "delta": -2, "receipt": 5}`, 400, `field \"receipt\" must be a string`},
		{"/v1/adjust", `{"key": "three:a", "delta": 2, "receipt": "{r}"}`, 200, `"remaining":0,`},
		{"/v1/take", `{"key": "three:a"}`, 200, `"allowed":false,`},
		{"/v1/adjust", `{"key": "three:a", "delta": 0}`, 200, `"remaining":0,`},
		{"/v1/adjust", `{"key": "three:a", "delta": 1.5}`, 400, `{"error":"delta must be an integer between -9007199254740991 and 9007199254740991"}`},
		{"/v1/adjust", `{"key": "three:a", "delta": "1"}`, 400, `delta must be an integer`},
		{"/v1/adjust", `{"key": "three:a", "delta": 9007199254740992}`, 400, `delta must be an integer`},
		{"/v1/adjust", `{"key": "three:a"}`, 400, `{"error":"\"delta\" is required"}`},
		{"/v1/adjust", `{"delta": 1}`, 400, `{"error":"\"key\" is required"}`},
		{"/v1/adjust", `{"key": "three:a", "delta": 1, "cost": 1}`, 400, `unknown field`},
		{"/v1/adjust", `[{"key": "three:a", "delta": 1}]`, 400, `body must be a JSON object`},
		{"/v1/adjust", `{"key": "", "delta": 1}`, 400, `{"error":"key must not be empty"}`},
		{"/v1/adjust", `{"key": "none", "delta": 1}`, 404, `{"error":"no policy matches key 'none'"}`},
	}
	receipt := ""
	for i, st := range steps {
		resp := do(t, s, "POST", st.path, strings.ReplaceAll(st.body, "{r}", receipt))
		got := bodyText(t, resp)
		if resp.StatusCode != st.status || !strings.Contains(got, st.want) {
			t.Errorf("step %d %s %s: %d %s, want %d and %s", i, st.path, st.body, resp.StatusCode, got, st.status, st.want)
		}
		if i == 0 {
			var b struct{ Receipt string }
			if err := json.Unmarshal([]byte(got), &b); err != nil || len(b.Receipt) != 32 {
				t.Fatalf("take with a receipt: %s (%v)", got, err)
			}
			receipt = b.Receipt
		}
	}
	if resp := do(t, s, "GET", "/v1/adjust", ""); resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET /v1/adjust: %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// POST /v1/take as a batch: each item asks for its own receipt or not,
// and only those that asked get the field.
func TestTakeReceiptBatch(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	resp := do(t, s, "POST", "/v1/take", `[{"key": "three:b", "receipt": true}, {"key": "three:b"}, {"key": "three:b", "cost": 5, "receipt": true}]`)
	got := bodyText(t, resp)
	var items []map[string]any
	if err := json.Unmarshal([]byte(got), &items); err != nil || resp.StatusCode != 200 || len(items) != 3 {
		t.Fatalf("batch: %d %s (%v)", resp.StatusCode, got, err)
	}
	if r, ok := items[0]["receipt"].(string); !ok || len(r) != 32 {
		t.Errorf("item 0: %v, want a receipt", items[0])
	}
	if _, ok := items[1]["receipt"]; ok {
		t.Errorf("item 1 asked for no receipt: %v", items[1])
	}
	if r, ok := items[2]["receipt"].(string); !ok || r != "" || items[2]["allowed"] != false {
		t.Errorf("item 2 (refused): %v, want an empty receipt", items[2])
	}
}
