package bench

import (
	"embed"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"
)

// thousands formats v rounded to an integer with comma separators; n/a for
// NaN.
func thousands(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

// fixed formats v with prec decimals; n/a for NaN.
func fixed(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func ratio(a, b float64) float64 {
	if b == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return a / b
}

// ms renders milliseconds with the precision the value needs: 0.00021,
// 0.113, 12.5.
func ms(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v < 0.01:
		return fixed(v, 5)
	case v < 10:
		return fixed(v, 3)
	}
	return fixed(v, 1)
}

// cell escapes a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// errorCell is a table's cell of error replies: the count, and the first
// one's text when there was one.
func errorCell(n int64, first string) string {
	s := thousands(float64(n))
	if first != "" {
		s += " (first: " + cell(first) + ")"
	}
	return s
}

// reportTemplateFiles are the reports, one markdown template each (a lab,
// sluice-lab bench, bench --front, the soak): the words and the tables are
// there, the numbers come from the report.
//
//go:embed templates/*.md.tmpl
var reportTemplateFiles embed.FS

// reportTemplates are reportTemplateFiles parsed, with the functions that
// format their numbers; parsed once, read only.
var reportTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"thousands": func(v any) string {
		switch n := v.(type) {
		case int:
			return thousands(float64(n))
		case int64:
			return thousands(float64(n))
		case float64:
			return thousands(n)
		}
		return fmt.Sprint(v)
	},
	"ms": func(v any) string { // milliseconds, or a duration in milliseconds
		if d, ok := v.(time.Duration); ok {
			return ms(float64(d) / float64(time.Millisecond))
		}
		f, _ := v.(float64)
		return ms(f)
	},
	"seconds":      func(d time.Duration) time.Duration { return d.Round(time.Second) },
	"tenMillis":    func(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) },
	"inc":          func(i int) int { return i + 1 },
	"plural":       plural,
	"cpuSplit":     cpuSplit,
	"millis":       func(d time.Duration) time.Duration { return d.Round(time.Millisecond) },
	"fixed":        fixed,
	"cell":         cell,
	"errorCell":    errorCell,
	"formatCounts": formatCounts,
	"joinInts":     joinInts,
	"join":         strings.Join,
	"redisKey":     redisKey,
}).ParseFS(reportTemplateFiles, "templates/*.md.tmpl"))

// render fills the template templates/<name>.md.tmpl with its report.
// The templates are fixed and tested (the goldens in testdata/), so a
// failure is a bug; it is said in the text rather than panicking.
func render(name string, report any) string {
	var b strings.Builder
	if err := reportTemplates.ExecuteTemplate(&b, name+".md.tmpl", report); err != nil {
		fmt.Fprintf(&b, "\n\n(bug: the %s report did not render: %v)\n", name, err)
	}
	return b.String()
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.FormatInt(n, 10)
	}
	return strings.Join(s, " / ")
}

// formatCounts renders decided_by counts as "lease=123 store=4", sorted.
func formatCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+strconv.FormatInt(m[k], 10))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
