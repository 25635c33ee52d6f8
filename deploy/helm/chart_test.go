// Package helm checks the chart in ./sluice on paper, since no Kubernetes
// cluster runs in CI: rendered with Helm's Go SDK at each values file of
// values_test.go, linted, every object decoded strictly into the
// k8s.io/api types, and the container's args checked against what the
// sluice binary, built from this repository, accepts and starts with.
// It is a module of its own so the server's go.mod does not get Helm's.
package helm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Every values file renders the objects it should, each decoded strictly,
// with the facts the docs promise: probes on the admin port, the security
// context, the ConfigMap and the Secret mounted as directories, no
// password in the pod spec, Service and selectors that meet.
func TestChartRenders(t *testing.T) {
	t.Parallel()
	for _, tc := range valuesCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			vals := readValues(t, tc.values)
			o := render(t, vals)
			if got := o.kinds(); !slices.Equal(got, tc.kinds) {
				t.Errorf("kinds rendered:\n got %q\nwant %q", got, tc.kinds)
			}
			d := o.deployment(t)
			c := container(t, d)
			want := append(slices.Clone(valuesFlags), tc.args...)
			if slices.Contains(tc.kinds, "v1 ConfigMap") {
				want = append(want, "--config=/etc/sluice/config/sluice.yaml")
			}
			checkArgs(t, c.Args, want)
			checkReplicas(t, d, vals)
			checkProbes(t, c)
			checkSecurity(t, d, c)
			checkNoSubPath(t, c)
			checkConfigMount(t, o, d, c)
			checkSecretMount(t, o, d, c, tc)
			checkNoPasswordInSpec(t, d, vals)
			checkService(t, o, d, c)
			checkPDBAndHPA(t, o, d)
			checkServiceMonitor(t, o)
		})
	}
}

// container is the Deployment's one container.
func container(t *testing.T, d *appsv1.Deployment) *corev1.Container {
	t.Helper()
	cs := d.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	return &cs[0]
}

// checkArgs wants `serve` first and every flag of want in the args.
func checkArgs(t *testing.T, args, want []string) {
	t.Helper()
	if len(args) == 0 || args[0] != "serve" {
		t.Fatalf("args %q, want serve first", args)
	}
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("args %q lack %q", args, w)
		}
	}
}

func checkReplicas(t *testing.T, d *appsv1.Deployment, vals map[string]any) {
	t.Helper()
	hpa, _ := vals["autoscaling"].(map[string]any)
	switch got := d.Spec.Replicas; {
	case hpa["enabled"] == true && got != nil:
		t.Errorf("replicas %d beside the HPA, want none (the HPA owns them)", *got)
	case hpa["enabled"] != true && (got == nil || *got != 2):
		t.Errorf("replicas %v, want 2", got)
	}
}

// port is the container's port of that name, 0 if none.
func port(c *corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func checkProbes(t *testing.T, c *corev1.Container) {
	t.Helper()
	if got := port(c, "admin"); got != 9380 {
		t.Errorf("container port admin = %d, want 9380", got)
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe %+v, want an httpGet", p.what, p.probe)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || g.Port != intstr.FromString("admin") {
			t.Errorf("%s probe GET %s on port %s, want %s on admin", p.what, g.Path, g.Port.String(), p.path)
		}
	}
}

func checkSecurity(t *testing.T, d *appsv1.Deployment, c *corev1.Container) {
	t.Helper()
	ps := d.Spec.Template.Spec.SecurityContext
	if ps == nil || !isTrue(ps.RunAsNonRoot) || !is(ps.RunAsUser, 65532) ||
		ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %s, want runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault", jsonOf(ps))
	}
	cs := c.SecurityContext
	if cs == nil || !isTrue(cs.RunAsNonRoot) || !is(cs.RunAsUser, 65532) || !isTrue(cs.ReadOnlyRootFilesystem) ||
		cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation ||
		cs.Capabilities == nil || !slices.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(cs.Capabilities.Add) > 0 ||
		cs.SeccompProfile == nil || cs.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container securityContext %s, want non-root 65532, read-only root, no privilege escalation, drop ALL, seccomp RuntimeDefault", jsonOf(cs))
	}
	if s := d.Spec.Template.Spec.AutomountServiceAccountToken; s == nil || *s {
		t.Errorf("automountServiceAccountToken %v, want false (sluice calls no Kubernetes API)", s)
	}
	r := c.Resources
	if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
		t.Errorf("resources %s, want cpu and memory requests and a memory limit", jsonOf(r))
	}
}

func isTrue(b *bool) bool          { return b != nil && *b }
func is(n *int64, want int64) bool { return n != nil && *n == want }

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// mount is the container's mount of the volume name, nil if none.
func mount(c *corev1.Container, name string) *corev1.VolumeMount {
	for i, m := range c.VolumeMounts {
		if m.Name == name {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// checkNoSubPath fails a subPath mount of any volume: Kubernetes never
// updates one, so a policy change would not reach the pod.
func checkNoSubPath(t *testing.T, c *corev1.Container) {
	t.Helper()
	for _, m := range c.VolumeMounts {
		if m.SubPath != "" || m.SubPathExpr != "" {
			t.Errorf("volume %s mounted at %s with subPath %q (subPathExpr %q): a subPath mount never sees an update",
				m.Name, m.MountPath, m.SubPath, m.SubPathExpr)
		}
	}
}

// volume is the pod's volume of that name, nil if none.
func volume(d *appsv1.Deployment, name string) *corev1.Volume {
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == name {
			return &d.Spec.Template.Spec.Volumes[i]
		}
	}
	return nil
}

// flagValue is the value of --name=value in args, "" if none.
func flagValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// The policy file: --config names sluice.yaml in the directory where the
// chart's ConfigMap is mounted whole, read-only.
func checkConfigMount(t *testing.T, o *objects, d *appsv1.Deployment, c *corev1.Container) {
	t.Helper()
	file := flagValue(c.Args, "config")
	m, v := mount(c, "config"), volume(d, "config")
	if file == "" {
		if m != nil || v != nil || len(o.configMaps) > 0 {
			t.Errorf("no --config, but a config mount %+v, volume %+v or %d ConfigMaps", m, v, len(o.configMaps))
		}
		return
	}
	if m == nil || v == nil || v.ConfigMap == nil {
		t.Fatalf("config mount %+v, volume %+v: want the ConfigMap mounted", m, v)
	}
	if path.Join(m.MountPath, "sluice.yaml") != file || !m.ReadOnly {
		t.Errorf("ConfigMap mounted at %s (read-only %v), --config=%s: want the directory of --config, read-only", m.MountPath, m.ReadOnly, file)
	}
	cm, ok := o.configMaps[v.ConfigMap.Name]
	if !ok {
		t.Fatalf("volume config names ConfigMap %q; rendered: %q", v.ConfigMap.Name, slices.Sorted(maps.Keys(o.configMaps)))
	}
	if cm.Data["sluice.yaml"] == "" {
		t.Errorf("ConfigMap %s has no sluice.yaml: %q", cm.Name, slices.Sorted(maps.Keys(cm.Data)))
	}
	if got := v.ConfigMap.Items; len(got) != 1 || got[0].Key != "sluice.yaml" || got[0].Path != "sluice.yaml" {
		t.Errorf("ConfigMap items %+v, want sluice.yaml as sluice.yaml", got)
	}
}

// The passwords and the aclfile: a Secret (the chart's or the user's)
// mounted whole, read-only, each part a file that its --*-file flag names.
func checkSecretMount(t *testing.T, o *objects, d *appsv1.Deployment, c *corev1.Container, tc valuesCase) {
	t.Helper()
	m, v := mount(c, "secrets"), volume(d, "secrets")
	if tc.secretName == "" {
		if m != nil || v != nil || len(o.secrets) > 0 {
			t.Errorf("a Secret mounted (%+v) or rendered (%d) with no secret values", v, len(o.secrets))
		}
		return
	}
	if m == nil || v == nil || v.Secret == nil {
		t.Fatalf("secrets mount %+v, volume %+v: want the Secret mounted", m, v)
	}
	if v.Secret.SecretName != tc.secretName || m.MountPath != "/etc/sluice/secrets" || !m.ReadOnly {
		t.Errorf("Secret %q mounted at %s (read-only %v), want %q at /etc/sluice/secrets, read-only",
			v.Secret.SecretName, m.MountPath, m.ReadOnly, tc.secretName)
	}
	if mode := v.Secret.DefaultMode; mode == nil || *mode&0o077 != 0o040 {
		t.Errorf("Secret files' mode %v, want readable by the owner and fsGroup only", mode)
	}
	items := map[string]string{}
	for _, it := range v.Secret.Items {
		items[it.Key] = it.Path
	}
	if !maps.Equal(items, tc.secretItems) {
		t.Errorf("Secret items %v, want %v", items, tc.secretItems)
	}
	for _, p := range items {
		file := path.Join(m.MountPath, p)
		if !slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasSuffix(a, "="+file) }) {
			t.Errorf("no flag names %s: %q", file, c.Args)
		}
	}
	if tc.secretName != "rl-sluice" {
		if len(o.secrets) > 0 {
			t.Errorf("a Secret rendered beside existingSecret: %q", slices.Sorted(maps.Keys(o.secrets)))
		}
		return
	}
	s, ok := o.secrets[tc.secretName]
	if !ok {
		t.Fatalf("Secret %s not rendered", tc.secretName)
	}
	if got := slices.Sorted(maps.Keys(s.Data)); !slices.Equal(got, slices.Sorted(maps.Keys(items))) {
		t.Errorf("Secret keys %q, want the items mounted %q", got, slices.Sorted(maps.Keys(items)))
	}
}

// checkNoPasswordInSpec wants none of the secret values in the whole pod
// spec (args, env, annotations): only in the Secret.
func checkNoPasswordInSpec(t *testing.T, d *appsv1.Deployment, vals map[string]any) {
	t.Helper()
	spec := jsonOf(d)
	secrets, _ := vals["secrets"].(map[string]any)
	for name, v := range secrets {
		s, ok := v.(string)
		if !ok || s == "" || name == "existingSecret" {
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
			sum := sha256.Sum256([]byte(line))
			if strings.Contains(spec, line) || strings.Contains(spec, hex.EncodeToString(sum[:])) {
				t.Errorf("secrets.%s (%q) or its SHA-256 is in the Deployment", name, line)
			}
		}
		whole := sha256.Sum256([]byte(s))
		if strings.Contains(spec, hex.EncodeToString(whole[:])) {
			t.Errorf("the SHA-256 of secrets.%s is in the Deployment", name)
		}
	}
}

// checkService wants the Service to select the pods and expose, by name,
// each door the container listens on.
func checkService(t *testing.T, o *objects, d *appsv1.Deployment, c *corev1.Container) {
	t.Helper()
	if len(o.services) != 1 {
		t.Fatalf("%d Services, want 1", len(o.services))
	}
	pods := d.Spec.Template.Labels
	if !selects(d.Spec.Selector.MatchLabels, pods) {
		t.Errorf("Deployment selector %v does not select its pods %v", d.Spec.Selector.MatchLabels, pods)
	}
	want := map[string]int32{"resp": 6380, "admin": 9380}
	if flagValue(c.Args, "http") != "" {
		want["http"] = 8080
	}
	if flagValue(c.Args, "grpc") != "" {
		want["grpc"] = 8081
	}
	for _, s := range o.services {
		if !selects(s.Spec.Selector, pods) {
			t.Errorf("Service selector %v does not select the pods %v", s.Spec.Selector, pods)
		}
		got := map[string]int32{}
		for _, p := range s.Spec.Ports {
			got[p.Name] = p.Port
			if p.TargetPort != intstr.FromString(p.Name) || port(c, p.Name) != p.Port {
				t.Errorf("Service port %s (%d) targets %s; container port %s is %d", p.Name, p.Port, p.TargetPort.String(), p.Name, port(c, p.Name))
			}
		}
		if !maps.Equal(got, want) {
			t.Errorf("Service ports %v, want %v", got, want)
		}
	}
	flags := map[string]string{"resp": "listen", "admin": "admin", "http": "http", "grpc": "grpc"}
	for name, p := range want {
		if addr := flagValue(c.Args, flags[name]); addr != fmt.Sprintf(":%d", p) {
			t.Errorf("door %s: --%s=%s, want :%d (every address of the pod)", name, flags[name], addr, p)
		}
	}
}

// selects reports whether a selector's labels are all in labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func checkPDBAndHPA(t *testing.T, o *objects, d *appsv1.Deployment) {
	t.Helper()
	for _, p := range o.pdbs {
		if !selects(p.Spec.Selector.MatchLabels, d.Spec.Template.Labels) {
			t.Errorf("PodDisruptionBudget selector %v does not select the pods", p.Spec.Selector.MatchLabels)
		}
		if p.Spec.MaxUnavailable == nil || *p.Spec.MaxUnavailable != intstr.FromInt32(1) || p.Spec.MinAvailable != nil {
			t.Errorf("PodDisruptionBudget %s, want maxUnavailable 1", jsonOf(p.Spec))
		}
	}
	for _, h := range o.hpas {
		ref := h.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != d.Name {
			t.Errorf("HPA scales %+v, want the Deployment %s", ref, d.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas != 3 || h.Spec.MaxReplicas != 12 {
			t.Errorf("HPA replicas %v to %d, want 3 to 12", h.Spec.MinReplicas, h.Spec.MaxReplicas)
		}
		if len(h.Spec.Metrics) != 1 || h.Spec.Metrics[0].Resource == nil || h.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU {
			t.Errorf("HPA metrics %s, want CPU", jsonOf(h.Spec.Metrics))
		}
	}
}

// checkServiceMonitor wants /metrics scraped on the Service's admin port.
func checkServiceMonitor(t *testing.T, o *objects) {
	t.Helper()
	for _, sm := range o.serviceMonitors {
		if sm.Metadata.Labels["release"] != "prometheus" {
			t.Errorf("ServiceMonitor labels %v lack serviceMonitor.labels", sm.Metadata.Labels)
		}
		if !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{release.Namespace}) {
			t.Errorf("ServiceMonitor namespaces %q, want %q", sm.Spec.NamespaceSelector.MatchNames, release.Namespace)
		}
		for _, s := range o.services {
			if !selects(sm.Spec.Selector.MatchLabels, s.Labels) {
				t.Errorf("ServiceMonitor selector %v does not select Service %s %v", sm.Spec.Selector.MatchLabels, s.Name, s.Labels)
			}
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "admin" || sm.Spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("ServiceMonitor endpoints %+v, want /metrics on port admin", sm.Spec.Endpoints)
		}
	}
}

// A change of the policies or of a password leaves the pod template as it
// was, so it restarts no pod: sluice reloads the policy file from the
// ConfigMap in place, and the passwords' hashes stay out of the pod spec
// (a password change needs kubectl rollout restart, docs/kubernetes.md).
func TestChartChangesRollNothing(t *testing.T) {
	t.Parallel()
	template := func(values string) string {
		t.Helper()
		return jsonOf(render(t, readValues(t, values)).deployment(t).Spec.Template)
	}
	base := template(passwordValues)
	for _, tc := range []struct{ what, values string }{
		{"the requirepass", strings.Replace(passwordValues, "client-Pw1", "client-Pw9", 1)},
		{"the policies", passwordValues + "config:\n  policies: |\n    defaults: {on_store_error: open}\n    policies: [{name: a, match: '*', limit: 1, rate: 1, period: 1s}]\n"},
	} {
		if got := template(tc.values); got != base {
			t.Errorf("a change of %s changes the pod template:\n%s\nwas\n%s", tc.what, got, base)
		}
	}
}

// The install notes warn that the embedded store limits per pod, and say
// nothing of it with a Redis store.
func TestChartNotesWarnEmbedded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		values string
		warns  bool
	}{{"", true}, {"replicaCount: 3", true}, {passwordValues, false}, {fullValues, false}} {
		files, err := renderChart(readValues(t, tc.values))
		if err != nil {
			t.Fatal(err)
		}
		notes := files[notesFile]
		if got := strings.Contains(notes, "the store is embedded"); got != tc.warns {
			t.Errorf("values %q: notes warn of the embedded store: %v, want %v\n%s", tc.values, got, tc.warns, notes)
		}
		if tc.warns && !strings.Contains(notes, fmt.Sprintf("the %d replicas admit up to %d times each limit", replicas(t, tc.values), replicas(t, tc.values))) {
			t.Errorf("notes do not name the replicas:\n%s", notes)
		}
	}
}

// replicas is replicaCount of a values file, 2 (values.yaml's) unless set.
func replicas(t *testing.T, values string) int {
	t.Helper()
	if n, ok := readValues(t, values)["replicaCount"].(float64); ok {
		return int(n)
	}
	return 2
}

// The ConfigMap holds config.policies line for line, whatever its first
// line's indent, so the file:line of sluice's errors is the line of the
// values the user wrote. Only newlines at the very end may go: Helm trims
// each rendered manifest (releaseutil.SplitManifests, helm install too).
func TestChartPoliciesVerbatim(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"  # indented first line\ndefaults: {on_store_error: open}\npolicies: [{name: a, match: '*', limit: 1, rate: 1, period: 1s}]\n",
		"defaults: {on_store_error: open}\npolicies: [{name: a, match: '*', limit: 1, rate: 1, period: 1s}]",
		"defaults:\n\ton_store_error: open # a tab\n\n\npolicies: []   \n\n",
		"# \"quotes\", a colon: and a #\n---\ndefaults: {on_store_error: closed}\n",
	} {
		vals := map[string]any{"config": map[string]any{"policies": text}}
		o := render(t, vals)
		if got := o.configMaps["rl-sluice"].Data["sluice.yaml"]; strings.TrimRight(got, "\n") != strings.TrimRight(text, "\n") {
			t.Errorf("ConfigMap sluice.yaml:\n%q\nwant config.policies:\n%q", got, text)
		}
	}
}
