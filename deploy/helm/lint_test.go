package helm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
)

// `helm lint` through the SDK, at every values file: no error and no
// warning (a deprecated API version is a warning); the INFO lines are
// logged.
func TestChartLint(t *testing.T) {
	t.Parallel()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range valuesCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l := lint.AllWithKubeVersion(chartDir, readValues(t, tc.values), release.Namespace, kv)
			for _, m := range l.Messages {
				if m.Severity >= support.WarningSev {
					t.Errorf("lint: %s", m)
				} else {
					t.Logf("lint: %s", m)
				}
			}
			if l.HighestSeverity >= support.WarningSev {
				t.Errorf("lint's highest severity: %d (2 warning, 3 error)", l.HighestSeverity)
			}
		})
	}
}

// The chart refuses values that sluice would refuse at start, or that
// would do nothing, with a message naming the value to change; helm
// install and helm template print it.
func TestChartRefusesBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, values, want string
	}{
		{"two stores", "store: {cluster: 'a:1', redis: 'redis://b:2'}", "give at most one of store.cluster, store.redis and store.sentinel"},
		{"aclfile beside requirepass", "secrets: {aclfile: 'user default on nopass ~* +@all', requirepass: x}", "aclfile and requirepass/adminPass are exclusive"},
		{"aclfile beside an existing adminPass", "secrets: {existingSecret: s, existingSecretKeys: {aclfile: a, adminPass: b}}", "aclfile and requirepass/adminPass are exclusive"},
		{"existingSecret with no key", "secrets: {existingSecret: s}", "existingSecretKeys names none of its keys"},
		{"existingSecret beside a value", "secrets: {existingSecret: s, existingSecretKeys: {requirepass: r}, adminPass: x}", "secrets.adminPass is set beside secrets.existingSecret"},
		{"a store password without a store", "secrets: {storePassword: x}", "no store is"},
		{"a store user without a store", "store: {user: sluice}", "no store is"},
		{"a sentinel password without sentinel", "store: {cluster: 'a:1'}\nsecrets: {sentinelPassword: x}", "without store.sentinel"},
		{"a password in the redis URL", "store: {redis: 'redis://u:hunter2@r:6379'}", "store.redis holds a password"},
		{"two doors on one port", "http: {enabled: true, port: 9380}", "two doors on one port"},
		{"a port out of range", "ports: {resp: 70000}", "at '/ports/resp': maximum: got 70,000, want 65,535"},
		{"a misspelt key", "replicas: 3", "additional properties 'replicas' not allowed"},
		{"a misspelt store key", "store: {clusters: 'a:1'}", "additional properties 'clusters' not allowed"},
		{"replicas as text", "replicaCount: two", "at '/replicaCount': got string, want integer"},
		{"a log format sluice lacks", "log: {format: logfmt}", "at '/log/format'"},
		{"an extra arg that is no flag", "extraArgs: ['max-clients=5']", "at '/extraArgs/0'"},
		{"a timeout that is no duration", "store: {cluster: 'a:1', timeout: '50'}", "at '/store/timeout'"},
		{"a chart flag in extraArgs", "extraArgs: ['--log-level=debug']", "extraArgs: --log-level is the chart's: set log.level instead"},
		{"a password in extraArgs", "extraArgs: ['--requirepass=hunter2']", "extraArgs: --requirepass is the chart's: set secrets.requirepass instead"},
		{"min above max", "autoscaling: {enabled: true, minReplicas: 5, maxReplicas: 2}", "minReplicas is above autoscaling.maxReplicas"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := renderChart(readValues(t, tc.values))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("render: %v; want an error with %q", err, tc.want)
			}
			t.Logf("%v", err)
		})
	}
}

// Lint sees a broken template, so TestChartLint can fail: the chart
// copied with one more template. (Values the chart refuses with `fail`
// are not lint errors: Helm's lint mode logs a fail and goes on, which is
// why TestChartRefusesBadValues renders instead.)
func TestChartLintSeesABrokenTemplate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, template string
		want           int
	}{
		{"a name no object may have", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_A_DNS_Name\ndata: {}\n", support.WarningSev},
		{"YAML that does not parse", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n   labels: {}\n", support.ErrorSev},
		{"a template that does not parse", "{{ if }}\n", support.ErrorSev},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "sluice")
			if err := os.CopyFS(dir, os.DirFS(chartDir)); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "templates", "bad.yaml"), []byte(tc.template), 0o644); err != nil {
				t.Fatal(err)
			}
			l := lint.All(dir, nil, release.Namespace, false)
			if l.HighestSeverity != tc.want {
				t.Fatalf("lint: highest severity %d, messages %v; want %d", l.HighestSeverity, l.Messages, tc.want)
			}
			for _, m := range l.Messages {
				t.Logf("lint: %s", m)
			}
		})
	}
}
