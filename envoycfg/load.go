package envoycfg

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluice-rl/sluice/internal/yamlnode"
	"github.com/sluice-rl/sluice/limit"
)

// Limits of what LoadDir reads, so that a wrong directory or a hostile
// file costs bounded memory and time.
const (
	// MaxFileBytes is the largest config file read.
	MaxFileBytes = 1 << 20
	// MaxFiles is the most config files one directory may hold.
	MaxFiles = 1000
	// MaxDepth is the deepest nesting of descriptors.
	MaxDepth = 32
	// nodesPerByte bounds the YAML nodes walked in a file, aliases counted
	// each time they are followed, to a few per byte of the file (plus
	// nodesSlack), so that an alias bomb stops early and the work of a
	// load stays proportional to the bytes read.
	nodesPerByte = 4
	nodesSlack   = 4096
	maxErrors    = 20
)

// The fields each mapping may hold. envoyproxy/ratelimit's own fields
// come first; algorithm and on_store_error are sluice's (see DefaultAlgorithm
// and DefaultOnStoreError), allowed at the top of a file (for its every
// rule) and in a rate_limit.
var (
	fileFields       = []string{"domain", "descriptors", "algorithm", "on_store_error"}
	descriptorFields = []string{"key", "value", "rate_limit", "shadow_mode", "quota_mode", "detailed_metric", "value_to_metric", "share_threshold", "metadata", "descriptors"}
	rateLimitFields  = []string{"unit", "requests_per_unit", "unlimited", "name", "replaces", "algorithm", "on_store_error"}
	replacesFields   = []string{"name"}
)

// Error is one problem of a config directory. LoadDir returns these
// (several joined with errors.Join); errors.As finds the first. Its text is
//
//	FILE:LINE: PATH: MSG
//
// e.g. "edge.yaml:7: descriptors[1].rate_limit.unitt: unknown field …",
// each of the first three parts left out when empty or zero.
type Error struct {
	File string
	Line int
	Path string // descriptors[1].rate_limit.unit; "" for the file itself
	Msg  string
}

func (e *Error) Error() string { return yamlnode.Message(e.File, e.Line, e.Msg, e.Path) }

// LoadDir reads every *.yaml and *.yml file of dir (not its
// subdirectories, nor names starting with a dot; symbolic links are
// followed, so a Kubernetes ConfigMap mount works) in envoyproxy/ratelimit's
// format. Every problem found is reported, each naming its file, line and
// path; a config with any problem is refused as a whole.
func LoadDir(dir string) (*Config, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("envoy config: %w", err)
	}
	b := newBuilder()
	n := 0
	for _, e := range ents { // sorted by name
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		path := filepath.Join(dir, name)
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			continue // a directory named x.yaml, or a dangling link
		}
		if n++; n > MaxFiles {
			b.errorf(path, 0, "", "more than %d config files in %s", MaxFiles, dir)
			break
		}
		data, err := readFile(path)
		if err != nil {
			b.errorf(path, 0, "", "%v", err)
			continue
		}
		b.file(path, data)
	}
	if n == 0 && len(b.errs) == 0 {
		return nil, fmt.Errorf("envoy config: no *.yaml or *.yml files in %s", dir)
	}
	return b.done()
}

// Parse reads one file's content as LoadDir would.
func Parse(name string, data []byte) (*Config, error) {
	b := newBuilder()
	if len(data) > MaxFileBytes {
		b.errorf(name, 0, "", "larger than %d bytes", MaxFileBytes)
	} else {
		b.file(name, data)
	}
	return b.done()
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("larger than %d bytes", MaxFileBytes)
	}
	return data, nil
}

// builder turns YAML files into a Config, collecting errors.
type builder struct {
	c       *Config
	errs    []*Error
	domains map[string]string // domain → the file that defined it
	more    int               // errors beyond maxErrors
}

func newBuilder() *builder {
	return &builder{c: &Config{domains: map[string]level{}}, domains: map[string]string{}}
}

func (b *builder) errorf(file string, line int, path, format string, args ...any) {
	if len(b.errs) >= maxErrors {
		b.more++ // counted, not formatted: a garbage file costs no memory
		return
	}
	b.errs = append(b.errs, &Error{File: file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// count is the number of errors found so far.
func (b *builder) count() int { return len(b.errs) + b.more }

func (b *builder) done() (*Config, error) {
	if len(b.errs) == 0 {
		return b.c, nil
	}
	errs := make([]error, 0, len(b.errs)+1)
	for _, e := range b.errs {
		errs = append(errs, e)
	}
	if b.more > 0 {
		errs = append(errs, fmt.Errorf("… and %d more", b.more))
	}
	return nil, errors.Join(errs...)
}

// defaults are the sluice fields a file sets for its every rule.
type defaults struct {
	algorithm limit.Algorithm
	onError   limit.FailMode
}

// fileWalk is the state of reading one file.
type fileWalk struct {
	*builder
	name   string
	domain string
	def    defaults
	nodes  int  // YAML nodes left to walk
	budget bool // false once nodes ran out (reported once)
}

func (w *fileWalk) errorf(n *yaml.Node, path, format string, args ...any) {
	w.builder.errorf(w.name, n.Line, path, format, args...)
}

// spend takes one node from the budget; false when none is left.
func (w *fileWalk) spend(n *yaml.Node) bool {
	if w.nodes--; w.nodes >= 0 {
		return true
	}
	if w.budget {
		w.budget = false
		w.errorf(n, "", "too many YAML nodes for the file's size (aliases counted each time they are used): refusing to read further")
	}
	return false
}

func (b *builder) file(name string, data []byte) {
	w := &fileWalk{builder: b, name: name, budget: true, nodes: nodesPerByte*len(data) + nodesSlack}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			b.errorf(name, 0, "", "the file is empty: want domain and descriptors")
		} else {
			b.errorf(name, 0, "", "invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return
	}
	var next yaml.Node
	if err := dec.Decode(&next); err == nil {
		b.errorf(name, next.Line, "", "only one YAML document is allowed, found another")
		return
	} else if !errors.Is(err, io.EOF) {
		b.errorf(name, 0, "", "invalid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return
	}
	root := yamlnode.Deref(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = yamlnode.Deref(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		w.errorf(root, "", "the file must be a mapping of domain and descriptors, got %s", yamlnode.Describe(root))
		return
	}
	var descs *yaml.Node
	w.def = defaults{algorithm: DefaultAlgorithm, onError: DefaultOnStoreError}
	w.pairs(root, "", fileFields, func(key string, v *yaml.Node) {
		switch key {
		case "domain":
			if s, ok := w.text(v, "domain"); ok {
				w.domain = s
			}
		case "descriptors":
			descs = v
		case "algorithm":
			if a, ok := w.algorithm(v, "algorithm"); ok {
				w.def.algorithm = a
			}
		case "on_store_error":
			if m, ok := w.failMode(v, "on_store_error"); ok {
				w.def.onError = m
			}
		}
	})
	lv := level{} // a bad domain's descriptors are still checked, into nowhere
	switch first, dup := b.domains[w.domain]; {
	case w.domain == "":
		w.errorf(root, "domain", "required: the domain Envoy names in its requests")
	case dup:
		w.errorf(root, "domain", "duplicate domain %q: %s defines it too", w.domain, first)
	default:
		b.domains[w.domain] = name
		b.c.domains[w.domain] = lv
	}
	if descs != nil {
		w.descriptors(descs, "", escaped(w.domain), lv, 1)
	}
}

// descriptors reads a descriptor list at path into lv; prefix is the
// policy name of the list's parent.
func (w *fileWalk) descriptors(v *yaml.Node, path, prefix string, lv level, depth int) {
	field := path + "descriptors"
	if v.Kind != yaml.SequenceNode {
		w.errorf(v, field, "must be a list of descriptors, got %s", yamlnode.Describe(v))
		return
	}
	if depth > MaxDepth {
		w.errorf(v, field, "nested deeper than %d levels", MaxDepth)
		return
	}
	seen := map[[2]string]int{}
	for i, item := range v.Content {
		item = yamlnode.Deref(item)
		if !w.spend(item) {
			return
		}
		p := fmt.Sprintf("%s[%d]", field, i)
		if item.Kind != yaml.MappingNode {
			w.errorf(item, p, "must be a mapping of key, value, rate_limit, descriptors…, got %s", yamlnode.Describe(item))
			continue
		}
		w.descriptor(item, p, prefix, lv, depth, seen)
	}
}

// descriptor reads one descriptor at path into lv; seen holds the line of
// each key and value read on this level.
func (w *fileWalk) descriptor(n *yaml.Node, path, prefix string, lv level, depth int, seen map[[2]string]int) {
	var key, value string
	var hasKey bool
	var rl, children *yaml.Node
	var shadow, share, quota bool
	w.pairs(n, path, descriptorFields, func(f string, v *yaml.Node) {
		fp := path + "." + f
		switch f {
		case "key":
			key, hasKey = w.text(v, fp)
		case "value":
			value, _ = w.text(v, fp)
		case "rate_limit":
			rl = v
		case "descriptors":
			children = v
		case "shadow_mode":
			shadow, _ = w.boolean(v, fp)
		case "share_threshold":
			share, _ = w.boolean(v, fp)
		case "quota_mode":
			quota, _ = w.boolean(v, fp)
		case "detailed_metric", "value_to_metric":
			w.boolean(v, fp) // metrics of ratelimit only: read, checked, no effect
		case "metadata":
			// Returned by ratelimit to Envoy as is; sluice does not.
		}
	})
	if !hasKey || key == "" {
		if !hasKey {
			w.errorf(n, path+".key", "required: every descriptor has a key")
		} else {
			w.errorf(n, path+".key", "must not be empty")
		}
		return
	}
	if first, dup := seen[[2]string{key, value}]; dup {
		what := key
		if value != "" {
			what += "=" + value
		}
		w.errorf(n, path, "duplicate descriptor %s on this level (first at line %d)", what, first)
		return
	}
	seen[[2]string{key, value}] = n.Line
	wild := strings.Contains(value, "*")
	if share && !wild {
		w.errorf(n, path+".share_threshold", "only a wildcard value (containing '*') can share a threshold, got value %q", value)
	}
	name := prefix + ":" + escaped(key)
	if value != "" {
		name += "=" + escaped(value)
	}
	nd := &node{children: level{}, share: share}
	k := lv[key]
	if k == nil {
		k = &keyed{exact: map[string]*node{}}
		lv[key] = k
	}
	switch {
	case value == "":
		k.any = nd
	case wild:
		nd.pattern, nd.parts = value, strings.Split(value, "*")
		k.wild = append(k.wild, nd)
	default:
		k.exact[value] = nd
	}
	if rl != nil {
		nd.rule = w.rateLimit(rl, path+".rate_limit", name, path, shadow)
		if nd.rule != nil {
			nd.rule.Quota = quota
		}
	}
	if children != nil {
		w.descriptors(children, path+".", name, nd.children, depth+1)
	}
}

// rateLimit reads a rate_limit block into a Rule; nil after an error.
func (w *fileWalk) rateLimit(v *yaml.Node, path, name, descPath string, shadow bool) *Rule {
	if v.Kind != yaml.MappingNode {
		w.errorf(v, path, "must be a mapping of unit and requests_per_unit, got %s", yamlnode.Describe(v))
		return nil
	}
	before := w.count()
	r := &Rule{ID: name, Domain: w.domain, File: w.name, Path: descPath}
	var unitNode *yaml.Node
	var rpu int64
	hasRPU := false
	alg, onErr := w.def.algorithm, w.def.onError
	w.pairs(v, path, rateLimitFields, func(f string, v *yaml.Node) {
		fp := path + "." + f
		switch f {
		case "unit":
			if s, ok := w.text(v, fp); ok {
				unitNode, r.Unit = v, strings.ToLower(s)
				if _, known := Units[r.Unit]; !known {
					w.errorf(v, fp, "unknown unit %q, want one of second, minute, hour, day, week, month, year", s)
				}
			}
		case "requests_per_unit":
			rpu, hasRPU = w.uint32(v, fp)
		case "unlimited":
			r.Unlimited, _ = w.boolean(v, fp)
		case "name":
			r.Name, _ = w.text(v, fp)
		case "replaces":
			r.Replaces = w.replaces(v, fp)
		case "algorithm":
			if a, ok := w.algorithm(v, fp); ok {
				alg = a
			}
		case "on_store_error":
			if m, ok := w.failMode(v, fp); ok {
				onErr = m
			}
		}
	})
	for _, rep := range r.Replaces {
		if rep == r.Name && rep != "" {
			w.errorf(v, path+".replaces", "a rule cannot replace itself (%q)", rep)
		}
	}
	switch {
	case r.Unlimited:
		if unitNode != nil {
			w.errorf(unitNode, path+".unit", "must not be set when unlimited is true")
		}
	case unitNode == nil:
		w.errorf(v, path+".unit", "required: second, minute, hour, day, week, month or year (or unlimited: true)")
	case !hasRPU && w.count() == before:
		w.errorf(v, path+".requests_per_unit", "required: requests allowed per unit (0 refuses every request)")
	}
	if w.count() > before {
		return nil
	}
	if !r.Unlimited {
		r.Policy = &limit.Policy{Name: name, Algorithm: alg, Limit: rpu, Rate: rpu, Period: Units[r.Unit], OnStoreError: onErr, Shadow: shadow}
		if msg := representable(r.Policy); msg != "" {
			w.errorf(v, path, "%s", msg)
			return nil
		}
		if rpu == 0 {
			r.Policy.Rate = 1 // never used: a blocked rule reaches no store
		}
		r.Policy.Hot = r.Policy.DefaultHot() // as a sluice policy without a hot block
	}
	w.c.rules = append(w.c.rules, r)
	return r
}

// representable says why sluice's store cannot hold the policy, or "".
func representable(p *limit.Policy) string {
	if p.Limit == 0 {
		return ""
	}
	var err error
	if p.Algorithm.IsBucket() {
		_, err = p.Bucket()
	} else {
		_, err = p.Window()
	}
	if err != nil {
		return fmt.Sprintf("%s cannot be held: %v", p.Algorithm, err)
	}
	return ""
}

func (w *fileWalk) replaces(v *yaml.Node, path string) []string {
	if v.Kind != yaml.SequenceNode {
		w.errorf(v, path, "must be a list of {name: …}, got %s", yamlnode.Describe(v))
		return nil
	}
	var out []string
	for i, item := range v.Content {
		item = yamlnode.Deref(item)
		p := fmt.Sprintf("%s[%d]", path, i)
		if !w.spend(item) {
			return out
		}
		if item.Kind != yaml.MappingNode {
			w.errorf(item, p, "must be a mapping {name: …}, got %s", yamlnode.Describe(item))
			continue
		}
		name := ""
		w.pairs(item, p, replacesFields, func(_ string, v *yaml.Node) { name, _ = w.text(v, p+".name") })
		if name == "" {
			w.errorf(item, p+".name", "required: the name of the rate_limit this one replaces")
			continue
		}
		out = append(out, name)
	}
	return out
}

// pairs calls f for each field of mapping n whose value is not null,
// reporting duplicate, unknown and non-string field names. YAML merge keys
// (<<: *anchor) are resolved as ratelimit's YAML decoder resolves them: the
// mapping's own fields win, then the merged ones in order.
func (w *fileWalk) pairs(n *yaml.Node, path string, known []string, f func(key string, v *yaml.Node)) {
	seen := map[string]int{}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	for _, kv := range w.fields(n, path, 0) {
		k, v := kv.k, kv.v
		if !w.spend(v) {
			return
		}
		if k.Kind != yaml.ScalarNode {
			w.errorf(k, path, "field names must be strings, got %s", yamlnode.Describe(k))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			if !kv.merged {
				w.errorf(k, join(k.Value), "set twice (first at line %d)", first)
			}
			continue
		}
		seen[k.Value] = k.Line
		if !slices.Contains(known, k.Value) {
			msg := fmt.Sprintf("unknown field %q", k.Value)
			if s := yamlnode.Suggest(k.Value, known); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			} else {
				msg += fmt.Sprintf(" (want one of %s)", strings.Join(known, ", "))
			}
			w.errorf(k, join(k.Value), "%s", msg)
			continue
		}
		if v.ShortTag() == "!!null" {
			continue
		}
		f(k.Value, v)
	}
}

type field struct {
	k, v   *yaml.Node
	merged bool
}

// fields lists mapping n's fields, its own first, then those of its merge
// keys.
func (w *fileWalk) fields(n *yaml.Node, path string, depth int) []field {
	var own, merged []field
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlnode.Deref(n.Content[i]), yamlnode.Deref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!merge" {
			own = append(own, field{k: k, v: v})
			continue
		}
		srcs := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			srcs = v.Content
		}
		for _, src := range srcs {
			src = yamlnode.Deref(src)
			if !w.spend(src) {
				break
			}
			if src.Kind != yaml.MappingNode || depth >= 8 {
				w.errorf(src, path, "a merge key (<<) must name a mapping, got %s", yamlnode.Describe(src))
				continue
			}
			for _, fl := range w.fields(src, path, depth+1) {
				fl.merged = true
				merged = append(merged, fl)
			}
		}
	}
	return append(own, merged...)
}

// text reads a scalar as text, as ratelimit's YAML decoder does: value: 500
// is the string "500".
func (w *fileWalk) text(v *yaml.Node, path string) (string, bool) {
	if v.Kind != yaml.ScalarNode {
		w.errorf(v, path, "must be a string, got %s", yamlnode.Describe(v))
		return "", false
	}
	return v.Value, true
}

// boolean reads true or false; yes, no, on and off too, which the YAML 1.1
// decoder of ratelimit reads as booleans.
func (w *fileWalk) boolean(v *yaml.Node, path string) (bool, bool) {
	if v.Kind == yaml.ScalarNode {
		switch strings.ToLower(v.Value) {
		case "true", "yes", "on":
			return true, true
		case "false", "no", "off":
			return false, true
		}
	}
	w.errorf(v, path, "must be true or false, got %s", yamlnode.Describe(v))
	return false, false
}

func (w *fileWalk) uint32(v *yaml.Node, path string) (int64, bool) {
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!int" {
		n, err := strconv.ParseInt(strings.ReplaceAll(v.Value, "_", ""), 0, 64)
		if err == nil && n >= 0 && n <= 1<<32-1 {
			return n, true
		}
	}
	w.errorf(v, path, "must be an integer from 0 to 4294967295, got %s", yamlnode.Describe(v))
	return 0, false
}

func (w *fileWalk) algorithm(v *yaml.Node, path string) (limit.Algorithm, bool) {
	if s, ok := w.text(v, path); ok {
		for _, a := range limit.Algorithms {
			if limit.Algorithm(s) == a {
				return a, true
			}
		}
		w.errorf(v, path, "unknown algorithm %q, want token_bucket, gcra, sliding_window or fixed_window", s)
	}
	return "", false
}

func (w *fileWalk) failMode(v *yaml.Node, path string) (limit.FailMode, bool) {
	if s, ok := w.text(v, path); ok {
		switch m := limit.FailMode(s); m {
		case limit.FailOpen, limit.FailClosed, limit.FailLocal:
			return m, true
		}
		w.errorf(v, path, "must be one of open, closed, local, got %q", s)
	}
	return "", false
}

// escaped is escape as a string.
func escaped(s string) string {
	var b strings.Builder
	escape(&b, s)
	return b.String()
}
