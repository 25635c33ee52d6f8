package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluice-rl/sluice/internal/yamlnode"
	"github.com/sluice-rl/sluice/limit"
)

// maxJSONDepth bounds the nesting of a JSON policy (it needs 2).
const maxJSONDepth = 16

// ParsePolicyJSON reads one policy written as a JSON object with the
// fields of a YAML policy, for RL.POLICY SET:
//
//	{"match": "login:*", "limit": 5, "rate": 5, "period": "1m", "on_store_error": "closed"}
//
// Durations are strings. The policy is called name; a "name" field, if
// present, must agree. There are no defaults to inherit, so on_store_error
// is required. Unknown fields, duplicate fields and trailing data are
// errors. The checks and messages are those of Parse; the error returned
// is the first problem found, one line, without a file or line number.
func ParsePolicyJSON(name string, data []byte) (*limit.Policy, error) {
	scope := scopeOf(0, name)
	first := func(errs errorList) error {
		if len(errs) == 0 {
			return nil
		}
		e := *errs[0]
		e.Line = 0
		return &e
	}
	n, err := jsonNode(data)
	if err != nil {
		return nil, &Error{Scope: scope, Msg: "invalid JSON: " + err.Error()}
	}
	if n.Kind != yaml.MappingNode {
		return nil, &Error{Scope: scope, Msg: "must be a JSON object of policy fields, got " + yamlnode.Describe(n)}
	}
	w := &walker{}
	r := w.policy(n, scope)
	if len(w.errs) > 0 {
		return nil, first(w.errs)
	}
	p, skip := merge(nil, r)
	if p.Name != "" && p.Name != name {
		return nil, &Error{Scope: scope, Field: "name", Msg: fmt.Sprintf("%q does not agree with the policy name %q", p.Name, name)}
	}
	p.Name = name
	var errs errorList
	build(&errs, "", 0, []entry{{p: p, scope: scope, skip: skip, lines: r.lines}})
	if len(errs) > 0 {
		return nil, first(errs)
	}
	return p, nil
}

// jsonNode reads one JSON value into a yaml.Node tree that the YAML walker
// takes as if it were YAML, keeping the order and duplicates of keys.
func jsonNode(data []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := jsonValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("unexpected data after the object")
	}
	return n, nil
}

func jsonValue(dec *json.Decoder, depth int) (*yaml.Node, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	scalar := func(tag, v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v} }
	switch t := tok.(type) {
	case json.Delim:
		var n *yaml.Node
		switch t {
		case '{':
			n = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		case '[':
			n = &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		default:
			return nil, fmt.Errorf("unexpected %q", t)
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := k.(string) // json.Decoder only yields strings here
				n.Content = append(n.Content, scalar("!!str", key))
			}
			v, err := jsonValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return scalar("!!str", t), nil
	case json.Number:
		if strings.ContainsAny(t.String(), ".eE") {
			return scalar("!!float", t.String()), nil
		}
		return scalar("!!int", t.String()), nil
	case bool:
		return scalar("!!bool", fmt.Sprint(t)), nil
	case nil:
		return scalar("!!null", "null"), nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}
