package main

// A small extractor of the names a PromQL expression refers to, for the
// check of deploy/grafana and deploy/prometheus against what the binary
// exports (dashboard_test.go). It is not a PromQL parser: it tokenises,
// skips strings, ranges and Grafana variables, and reads three shapes —
// a metric name (any identifier that is not a keyword, not a function
// call and not inside a grouping list), the label matchers of the
// {...} that follows one, and the label lists of by, without, on,
// ignoring, group_left and group_right. That is every shape the
// dashboard and the rules use; anything else it cannot read is an error,
// so a new shape fails the test rather than passing unchecked.

import (
	"fmt"
	"strings"
	"unicode"
)

// promRefs are the names one expression refers to.
type promRefs struct {
	Metrics  []string    // as written: sluice_x_bucket, up
	Matchers []promMatch // label matchers, each with its metric ("" for a bare {…})
	Grouping []string    // labels of by, without, on, ignoring, group_left, group_right
	Calls    []string    // functions and aggregations called
}

// promMatch is one label matcher: metric{label op "value"}.
type promMatch struct {
	Metric, Label, Op, Value string
}

// promKeywords are PromQL's words that are neither metrics nor calls.
var promKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
}

// promAggregations may put their by or without clause before their
// arguments: sum by (x) (…).
var promAggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true}

// promGrouping are the keywords followed by a list of label names.
var promGrouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// parsePromRefs extracts the references of expr.
func parsePromRefs(expr string) (promRefs, error) {
	var out promRefs
	s := []rune(expr)
	i := 0
	skipSpace := func() {
		for i < len(s) && unicode.IsSpace(s[i]) {
			i++
		}
	}
	ident := func() string {
		j := i
		for i < len(s) && (s[i] == '_' || s[i] == ':' || unicode.IsLetter(s[i]) || (i > j && unicode.IsDigit(s[i]))) {
			i++
		}
		return string(s[j:i])
	}
	str := func() (string, error) {
		q := s[i]
		j := i + 1
		var b strings.Builder
		for ; j < len(s) && s[j] != q; j++ {
			if s[j] == '\\' && q != '`' && j+1 < len(s) {
				j++
			}
			b.WriteRune(s[j])
		}
		if j >= len(s) {
			return "", fmt.Errorf("unterminated string at %d in %q", i, expr)
		}
		i = j + 1
		return b.String(), nil
	}
	// matchers reads {label op "value", …} at s[i] == '{', for metric.
	matchers := func(metric string) error {
		i++
		for {
			skipSpace()
			if i < len(s) && s[i] == '}' {
				i++
				return nil
			}
			if i < len(s) && s[i] == ',' {
				i++
				continue
			}
			name := ident()
			if name == "" {
				return fmt.Errorf("expected a label name at %d in %q", i, expr)
			}
			skipSpace()
			var op string
			for _, o := range []string{"=~", "!~", "!=", "="} {
				if strings.HasPrefix(string(s[i:min(i+2, len(s))]), o) {
					op = o
					break
				}
			}
			if op == "" {
				return fmt.Errorf("expected a matcher operator after %q at %d in %q", name, i, expr)
			}
			i += len(op)
			skipSpace()
			if i >= len(s) || (s[i] != '"' && s[i] != '\'' && s[i] != '`') {
				return fmt.Errorf("expected a quoted value for %q at %d in %q", name, i, expr)
			}
			v, err := str()
			if err != nil {
				return err
			}
			out.Matchers = append(out.Matchers, promMatch{metric, name, op, v})
		}
	}
	// grouping reads (label, …) at s[i] == '('.
	grouping := func() error {
		i++
		for {
			skipSpace()
			switch {
			case i >= len(s):
				return fmt.Errorf("unterminated label list in %q", expr)
			case s[i] == ')':
				i++
				return nil
			case s[i] == ',':
				i++
				continue
			}
			name := ident()
			if name == "" {
				return fmt.Errorf("expected a label name at %d in %q", i, expr)
			}
			out.Grouping = append(out.Grouping, name)
		}
	}
	for i < len(s) {
		c := s[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '"' || c == '\'' || c == '`': // a function's string argument
			if _, err := str(); err != nil {
				return out, err
			}
		case c == '[': // a range or subquery: durations and Grafana variables only
			j := i
			for i < len(s) && s[i] != ']' {
				i++
			}
			if i == len(s) {
				return out, fmt.Errorf("unterminated range at %d in %q", j, expr)
			}
			i++
		case c == '$': // a Grafana variable outside a string: $__rate_interval, ${x}
			i++
			if i < len(s) && s[i] == '{' {
				for i < len(s) && s[i] != '}' {
					i++
				}
				i++
			} else {
				ident()
			}
		case c == '{':
			if err := matchers(""); err != nil {
				return out, err
			}
		case unicode.IsDigit(c) || (c == '.' && i+1 < len(s) && unicode.IsDigit(s[i+1])):
			for i < len(s) && (unicode.IsDigit(s[i]) || unicode.IsLetter(s[i]) || s[i] == '.' || s[i] == '+' && (s[i-1] == 'e' || s[i-1] == 'E') || s[i] == '-' && (s[i-1] == 'e' || s[i-1] == 'E')) {
				i++ // 0.99, 1e3, 5m (offset), Inf/NaN are identifiers
			}
		case c == '_' || c == ':' || unicode.IsLetter(c):
			name := ident()
			skipSpace()
			next := rune(0)
			if i < len(s) {
				next = s[i]
			}
			switch {
			case promGrouping[name]:
				if next == '(' {
					if err := grouping(); err != nil {
						return out, err
					}
				} else if name != "group_left" && name != "group_right" {
					return out, fmt.Errorf("%s without a label list in %q", name, expr)
				}
			case promKeywords[name]:
			case next == '(' || (promAggregations[name] && (hasWordAt(s, i, "by") || hasWordAt(s, i, "without"))):
				out.Calls = append(out.Calls, name)
			case strings.EqualFold(name, "inf") || strings.EqualFold(name, "nan"):
			default:
				out.Metrics = append(out.Metrics, name)
				if next == '{' {
					if err := matchers(name); err != nil {
						return out, err
					}
				}
			}
		case strings.ContainsRune("()+-*/%^,=!<>~", c):
			i++
		default:
			return out, fmt.Errorf("unexpected %q at %d in %q", c, i, expr)
		}
	}
	return out, nil
}

// hasWordAt reports whether the identifier w starts at s[i].
func hasWordAt(s []rune, i int, w string) bool {
	j := i + len(w)
	if j > len(s) || string(s[i:j]) != w {
		return false
	}
	return j == len(s) || !(s[j] == '_' || unicode.IsLetter(s[j]) || unicode.IsDigit(s[j]))
}
