package helm

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// chartDir is the chart, from this package's directory.
const chartDir = "sluice"

// kubeVersion is the Kubernetes version the chart is rendered and linted
// for: the one of the k8s.io/api types it is decoded into (v0.37 is 1.37).
const kubeVersion = "v1.37.0"

// release is the release every render is of.
var release = chartutil.ReleaseOptions{Name: "rl", Namespace: "limits", Revision: 1, IsInstall: true}

// objects is one render of the chart, decoded: each kind's objects by
// name, and the text of each (for the checks that read files out of it).
type objects struct {
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	serviceAccounts map[string]*corev1.ServiceAccount
	pdbs            map[string]*policyv1.PodDisruptionBudget
	hpas            map[string]*autoscalingv2.HorizontalPodAutoscaler
	serviceMonitors map[string]*serviceMonitor
}

// kinds lists "apiVersion kind" of every object rendered, sorted, once each.
func (o *objects) kinds() []string {
	var k []string
	add := func(n int, kind string) {
		if n > 0 {
			k = append(k, kind)
		}
	}
	add(len(o.deployments), "apps/v1 Deployment")
	add(len(o.services), "v1 Service")
	add(len(o.configMaps), "v1 ConfigMap")
	add(len(o.secrets), "v1 Secret")
	add(len(o.serviceAccounts), "v1 ServiceAccount")
	add(len(o.pdbs), "policy/v1 PodDisruptionBudget")
	add(len(o.hpas), "autoscaling/v2 HorizontalPodAutoscaler")
	add(len(o.serviceMonitors), "monitoring.coreos.com/v1 ServiceMonitor")
	slices.Sort(k)
	return k
}

// deployment is the one Deployment of the render.
func (o *objects) deployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	if len(o.deployments) != 1 {
		t.Fatalf("%d Deployments rendered, want 1", len(o.deployments))
	}
	for _, d := range o.deployments {
		return d
	}
	return nil
}

// renderChart renders the chart with vals over values.yaml, as `helm
// install --dry-run` does on the client: the Helm SDK's chart loader and
// template engine, at kubeVersion. It returns each rendered template's
// text by its path (templates/deployment.yaml, templates/NOTES.txt), the
// partials left out.
func renderChart(vals map[string]any) (map[string]string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load the chart: %w", err)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		return nil, err
	}
	caps.KubeVersion = *kv
	rv, err := chartutil.ToRenderValues(ch, vals, release, caps)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	out, err := engine.Render(ch, rv)
	if err != nil {
		return nil, err
	}
	files := map[string]string{}
	for name, text := range out {
		name = strings.TrimPrefix(name, ch.Name()+"/")
		if strings.HasSuffix(name, ".yaml") || name == notesFile {
			files[name] = text
		}
	}
	return files, nil
}

// notesFile is what `helm install` prints after installing.
const notesFile = "templates/NOTES.txt"

// render renders the chart with vals and decodes every object strictly.
func render(t *testing.T, vals map[string]any) *objects {
	t.Helper()
	files, err := renderChart(vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	o, err := decodeAll(files)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// decodeAll decodes every object of the rendered files strictly into its
// k8s.io/api type (decodeStrict); a kind the chart is not meant to make
// is an error, and so is a name given twice within a kind.
func decodeAll(files map[string]string) (*objects, error) {
	o := &objects{
		deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{},
		serviceAccounts: map[string]*corev1.ServiceAccount{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		hpas: map[string]*autoscalingv2.HorizontalPodAutoscaler{}, serviceMonitors: map[string]*serviceMonitor{},
	}
	for _, file := range slices.Sorted(maps.Keys(files)) {
		if file == notesFile {
			continue
		}
		docs := releaseutil.SplitManifests(files[file])
		for _, key := range slices.Sorted(maps.Keys(docs)) {
			doc := docs[key]
			if strings.TrimSpace(doc) == "" {
				continue
			}
			if err := decodeObject(o, []byte(doc)); err != nil {
				return nil, fmt.Errorf("%s: %w\n%s", file, err, doc)
			}
		}
	}
	return o, nil
}

// decodeObject decodes one object by its apiVersion and kind into o.
func decodeObject(o *objects, doc []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	var err error
	switch gvk := head.APIVersion + " " + head.Kind; gvk {
	case "apps/v1 Deployment":
		err = put(o.deployments, head.Metadata.Name, doc)
	case "v1 Service":
		err = put(o.services, head.Metadata.Name, doc)
	case "v1 ConfigMap":
		err = put(o.configMaps, head.Metadata.Name, doc)
	case "v1 Secret":
		err = put(o.secrets, head.Metadata.Name, doc)
	case "v1 ServiceAccount":
		err = put(o.serviceAccounts, head.Metadata.Name, doc)
	case "policy/v1 PodDisruptionBudget":
		err = put(o.pdbs, head.Metadata.Name, doc)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		err = put(o.hpas, head.Metadata.Name, doc)
	case "monitoring.coreos.com/v1 ServiceMonitor":
		err = put(o.serviceMonitors, head.Metadata.Name, doc)
	default:
		return fmt.Errorf("a %q the chart is not meant to make", gvk)
	}
	if err != nil {
		return fmt.Errorf("%s %s %q: %w", head.APIVersion, head.Kind, head.Metadata.Name, err)
	}
	return nil
}

// put decodes doc strictly into a new T and adds it to m under name.
func put[T any](m map[string]*T, name string, doc []byte) error {
	if name == "" {
		return fmt.Errorf("no metadata.name")
	}
	if _, ok := m[name]; ok {
		return fmt.Errorf("rendered twice")
	}
	v := new(T)
	if err := decodeStrict(doc, v); err != nil {
		return err
	}
	m[name] = v
	return nil
}

// decodeStrict decodes YAML into v as the API server's strict field
// validation does: YAML to JSON (a duplicate key is an error), then
// sigs.k8s.io/json's case-sensitive decoder, for which a field the type
// does not have, or one given twice, is an error.
func decodeStrict(doc []byte, v any) error {
	js, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strict, err := kjson.UnmarshalStrict(js, v, kjson.DisallowDuplicateFields, kjson.DisallowUnknownFields)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		var b bytes.Buffer
		for i, e := range strict {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(e.Error())
		}
		return fmt.Errorf("strict decoding: %s", b.String())
	}
	return nil
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// (monitoring.coreos.com/v1, not in k8s.io/api) that the chart writes:
// decoded strictly, a field outside it fails, so a misspelt one cannot
// pass. Field names as in prometheus-operator's
// pkg/apis/monitoring/v1/servicemonitor_types.go.
type serviceMonitor struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   metaOnly           `json:"metadata"`
	Spec       serviceMonitorSpec `json:"spec"`
}

type metaOnly struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type serviceMonitorSpec struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	NamespaceSelector struct {
		Any        bool     `json:"any,omitempty"`
		MatchNames []string `json:"matchNames,omitempty"`
	} `json:"namespaceSelector"`
	Endpoints []struct {
		Port          string `json:"port"`
		Path          string `json:"path"`
		Scheme        string `json:"scheme,omitempty"`
		Interval      string `json:"interval,omitempty"`
		ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
	} `json:"endpoints"`
}
