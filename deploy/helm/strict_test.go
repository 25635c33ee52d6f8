package helm

import (
	"strings"
	"testing"
)

// The strict decoding refuses what the API server's strict field
// validation refuses, so a misspelt or misplaced field in a template
// cannot pass TestChartRenders.
func TestDecodeStrictRefuses(t *testing.T) {
	t.Parallel()
	const deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n"
	const monitor = "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: m\nspec:\n"
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"an unknown field", deployment + "  replicaz: 2\n", `unknown field "spec.replicaz"`},
		{"a field in the wrong case", deployment + "  Replicas: 2\n", `unknown field "spec.Replicas"`},
		{"a field in the wrong place", deployment + "  template:\n    spec:\n      containers:\n        - name: c\n          readOnlyRootFilesystem: true\n",
			`unknown field "spec.template.spec.containers[0].readOnlyRootFilesystem"`},
		{"a key given twice", deployment + "  replicas: 2\n  replicas: 3\n", `"replicas" already set in map`},
		{"a wrong type", deployment + "  replicas: two\n", "cannot unmarshal string"},
		{"an unknown ServiceMonitor field", monitor + "  endpoints:\n    - port: admin\n      intervall: 30s\n", `unknown field "spec.endpoints[0].intervall"`},
		{"a kind the chart does not make", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n", `a "v1 Pod" the chart is not meant to make`},
		{"no name", "apiVersion: v1\nkind: Service\nmetadata: {}\n", "no metadata.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := decodeAll(map[string]string{"templates/x.yaml": tc.doc})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decode: %v; want an error with %q", err, tc.want)
			}
			t.Logf("%s", strings.SplitN(err.Error(), "\n", 2)[0])
		})
	}
	if _, err := decodeAll(map[string]string{"templates/x.yaml": deployment + "  replicas: 2\n"}); err != nil {
		t.Errorf("a good Deployment refused: %v", err)
	}
}
