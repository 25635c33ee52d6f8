package main

// The shape of deploy/grafana/sluice.json and
// deploy/prometheus/sluice-rules.yml, and the check of every metric and
// label they name against one scrape of the binary (checkRefs). The
// scrape itself is made by TestDashboardAndRulesMatchExport
// (dashboard_test.go).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"
)

const (
	dashboardPath = "../../deploy/grafana/sluice.json"
	rulesPath     = "../../deploy/prometheus/sluice-rules.yml"
	operationsDoc = "../../docs/operations.md"
)

// grafanaDashboard is what the check reads of a dashboard.
type grafanaDashboard struct {
	Title         string         `json:"title"`
	UID           string         `json:"uid"`
	SchemaVersion int            `json:"schemaVersion"`
	Panels        []grafanaPanel `json:"panels"`
	Templating    struct {
		List []struct {
			Type       string          `json:"type"`
			Name       string          `json:"name"`
			Query      json.RawMessage `json:"query"`
			Datasource *grafanaDS      `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

type grafanaDS struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type grafanaPanel struct {
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *grafanaDS     `json:"datasource"`
	Panels     []grafanaPanel `json:"panels"` // a collapsed row's
	Targets    []struct {
		Expr       string     `json:"expr"`
		RefID      string     `json:"refId"`
		Datasource *grafanaDS `json:"datasource"`
	} `json:"targets"`
}

// promExpr is one expression of the dashboard or the rules, and where.
type promExpr struct{ where, expr string }

// loadDashboard reads the dashboard and checks its shape: importable
// (schemaVersion, a Prometheus datasource variable every panel and target
// uses), a policy variable over sluice_decisions_total, and every panel
// with a title and at least one target with an expression. It returns the
// expressions, the variables' label_values queries among them.
func loadDashboard(t *testing.T, path string) ([]promExpr, []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 {
		bad("title %q, uid %q, schemaVersion %d: want a title, a uid and a schemaVersion of Grafana 9 or later (>= 30)", d.Title, d.UID, d.SchemaVersion)
	}
	const dsVar = "${DS_PROMETHEUS}"
	var exprs []promExpr
	vars := map[string]string{}
	labelValuesRE := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			var q string
			_ = json.Unmarshal(v.Query, &q)
			vars[v.Name] = "datasource " + q
		case "query":
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				_ = json.Unmarshal(v.Query, &q.Query) // the older form: a string
			}
			vars[v.Name] = q.Query
			m := labelValuesRE.FindStringSubmatch(q.Query)
			if m == nil {
				bad("variable %s: query %q is not label_values(metric, label)", v.Name, q.Query)
				continue
			}
			if v.Datasource == nil || v.Datasource.UID != dsVar {
				bad("variable %s: datasource %+v, want uid %s", v.Name, v.Datasource, dsVar)
			}
			exprs = append(exprs, promExpr{"variable " + v.Name, fmt.Sprintf("%s{%s=~\".*\"}", m[1], m[2])})
		}
	}
	if vars["DS_PROMETHEUS"] != "datasource prometheus" {
		bad("no datasource variable DS_PROMETHEUS of type prometheus (variables: %v)", vars)
	}
	if vars["policy"] != "label_values(sluice_decisions_total, policy)" {
		bad("variable policy = %q, want label_values(sluice_decisions_total, policy)", vars["policy"])
	}
	var walk func(ps []grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if p.Type == "row" {
				if p.Title == "" {
					bad("a row without a title")
				}
				walk(p.Panels)
				continue
			}
			if p.Title == "" {
				bad("a %s panel without a title", p.Type)
			}
			if p.Datasource == nil || p.Datasource.UID != dsVar {
				bad("panel %q: datasource %+v, want uid %s", p.Title, p.Datasource, dsVar)
			}
			if len(p.Targets) == 0 {
				bad("panel %q has no target", p.Title)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" || tg.RefID == "" {
					bad("panel %q: a target without an expr or a refId", p.Title)
				}
				if tg.Datasource != nil && tg.Datasource.UID != dsVar {
					bad("panel %q target %s: datasource %+v, want uid %s", p.Title, tg.RefID, tg.Datasource, dsVar)
				}
				exprs = append(exprs, promExpr{fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), tg.Expr})
			}
		}
	}
	walk(d.Panels)
	if len(exprs) == 0 {
		bad("no expression at all")
	}
	return exprs, problems
}

// alertRules is the rules file, decoded strictly.
type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// runbookPrefix is what every rule's runbook_url starts with; the anchor
// after it must be a heading of docs/operations.md.
const runbookPrefix = "https://github.com/sluice-rl/sluice/blob/main/docs/operations.md#"

// loadRules reads the rules strictly (an unknown field is an error) and
// checks every rule: alert, expr, for, labels.severity, annotations
// summary, description and a runbook_url whose anchor docs/operations.md
// has. It returns the expressions.
func loadRules(t *testing.T, path, doc string) ([]promExpr, []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r alertRules
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		return nil, []string{fmt.Sprintf("%s: %v", path, err)}
	}
	anchors := docAnchors(t, doc)
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var exprs []promExpr
	seen := map[string]bool{}
	if len(r.Groups) == 0 {
		bad("no groups")
	}
	for _, g := range r.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			bad("group %q: want a name and rules", g.Name)
		}
		for i, rule := range g.Rules {
			where := fmt.Sprintf("group %s rule %d (%s)", g.Name, i+1, rule.Alert)
			if rule.Alert == "" || seen[rule.Alert] {
				bad("%s: alert name empty or repeated", where)
			}
			seen[rule.Alert] = true
			if strings.TrimSpace(rule.Expr) == "" {
				bad("%s: no expr", where)
			}
			if d, err := time.ParseDuration(rule.For); err != nil || d < 0 {
				bad("%s: for %q: want a duration such as 5m", where, rule.For)
			}
			if s := rule.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
				bad("%s: labels.severity %q, want critical, warning or info", where, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(rule.Annotations[a]) == "" {
					bad("%s: no annotations.%s", where, a)
				}
			}
			if u := rule.Annotations["runbook_url"]; u != "" {
				anchor, ok := strings.CutPrefix(u, runbookPrefix)
				if !ok || !anchors[anchor] {
					bad("%s: runbook_url %q: want %s<anchor> of a heading of docs/operations.md", where, u, runbookPrefix)
				}
			}
			exprs = append(exprs, promExpr{where, rule.Expr})
		}
	}
	return exprs, problems
}

// docAnchors returns the anchors GitHub makes of the headings of the
// Markdown file path: lower case, spaces to dashes, punctuation but - and
// _ dropped.
func docAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		h := strings.TrimLeft(line, "#")
		if h == line || !strings.HasPrefix(h, " ") {
			continue
		}
		var a strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				a.WriteByte('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				a.WriteRune(r)
			}
		}
		out[a.String()] = true
	}
	return out
}

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance"}

// prometheusSeries are series Prometheus makes itself for every target.
var prometheusSeries = map[string]bool{"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true,
	"scrape_samples_post_metric_relabeling": true, "scrape_series_added": true}

// checkRefs returns what expr names that the scrape fams does not have: a
// metric (a histogram's _bucket, _sum and _count are its family's), a
// label of a matcher that the metric does not carry, a label of by,
// without, on, ignoring or group_* that none of expr's metrics carries,
// and a value that a positive matcher (= or =~, without a Grafana
// variable) names and no series of the metric has.
func checkRefs(expr string, fams map[string]*dto.MetricFamily) []string {
	refs, err := parsePromRefs(expr)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	labelsOf := map[string]map[string]bool{} // metric as written → its labels
	all := map[string]bool{"__name__": true}
	for _, l := range targetLabels {
		all[l] = true
	}
	for _, m := range refs.Metrics {
		labels := map[string]bool{"__name__": true}
		for _, l := range targetLabels {
			labels[l] = true
		}
		if !prometheusSeries[m] {
			f, le := family(m, fams)
			if f == nil {
				problems = append(problems, fmt.Sprintf("metric %s is not exported", m))
				continue
			}
			for _, s := range f.GetMetric() {
				for _, lp := range s.GetLabel() {
					labels[lp.GetName()] = true
				}
			}
			labels["le"] = le
		}
		labelsOf[m] = labels
		for l, ok := range labels {
			all[l] = all[l] || ok
		}
	}
	for _, mt := range refs.Matchers {
		labels := all
		if mt.Metric != "" {
			if labels = labelsOf[mt.Metric]; labels == nil {
				continue // reported above
			}
		}
		if !labels[mt.Label] {
			problems = append(problems, fmt.Sprintf("label %s of %s{…} is not exported", mt.Label, mt.Metric))
			continue
		}
		if (mt.Op == "=" || mt.Op == "=~") && !strings.Contains(mt.Value, "$") && mt.Metric != "" &&
			!slices.Contains(targetLabels, mt.Label) && !prometheusSeries[mt.Metric] && mt.Label != "le" {
			if !hasValue(fams, mt) {
				problems = append(problems, fmt.Sprintf("no series %s{%s%s%q} is exported", mt.Metric, mt.Label, mt.Op, mt.Value))
			}
		}
	}
	for _, l := range refs.Grouping {
		if !all[l] {
			problems = append(problems, fmt.Sprintf("label %s (by, without, on, ignoring, group_*) is on none of %v", l, refs.Metrics))
		}
	}
	return problems
}

// family is the family of metric name m as written, and whether le is
// one of its labels (m is a histogram's _bucket).
func family(m string, fams map[string]*dto.MetricFamily) (*dto.MetricFamily, bool) {
	if f := fams[m]; f != nil {
		return f, false
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(m, suffix)
		if !ok {
			continue
		}
		f := fams[base]
		switch {
		case f == nil:
		case f.GetType() == dto.MetricType_HISTOGRAM:
			return f, suffix == "_bucket"
		case f.GetType() == dto.MetricType_SUMMARY && suffix != "_bucket":
			return f, false
		}
	}
	return nil, false
}

// hasValue reports whether a series of mt's metric has a value of mt's
// label that mt matches.
func hasValue(fams map[string]*dto.MetricFamily, mt promMatch) bool {
	f, _ := family(mt.Metric, fams)
	if f == nil {
		return false
	}
	re, err := regexp.Compile("^(?:" + mt.Value + ")$")
	if err != nil {
		return false
	}
	for _, s := range f.GetMetric() {
		for _, lp := range s.GetLabel() {
			if lp.GetName() == mt.Label && (mt.Op == "=" && lp.GetValue() == mt.Value || mt.Op == "=~" && re.MatchString(lp.GetValue())) {
				return true
			}
		}
	}
	return false
}

// The dashboard and the rules are well formed, without a running binary.
func TestDashboardAndRulesWellFormed(t *testing.T) {
	t.Parallel()
	dash, problems := loadDashboard(t, dashboardPath)
	rules, more := loadRules(t, rulesPath, operationsDoc)
	for _, p := range append(problems, more...) {
		t.Error(p)
	}
	for _, e := range append(dash, rules...) {
		if _, err := parsePromRefs(e.expr); err != nil {
			t.Errorf("%s: %v", e.where, err)
		}
	}
	if len(rules) < 8 {
		t.Errorf("%d rules, want the 8 the issue lists at least", len(rules))
	}
	if abs, err := filepath.Abs(dashboardPath); err == nil {
		t.Logf("%s: %d expressions; %s: %d rules", abs, len(dash), rulesPath, len(rules))
	}
}
