package ratelimitheader

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The parsing half of the package: a client's reading of the two fields,
// used by the tests of every door to check what a door sent against the
// draft's own rules (draft-ietf-httpapi-ratelimit-headers-11, sections 3
// and 4), and to read the draft's examples. A malformed field is an error,
// never a panic: the draft says a client MUST ignore it (section 7).

// Token is a structured-field token (RFC 9651, section 3.3.4).
type Token string

// Item is one member of a structured-field List (RFC 9651, section 3.1.2):
// a bare item and its parameters in the order the field has them. A value
// is an int64 (Integer), float64 (Decimal), string (String), Token, []byte
// (Byte Sequence), bool (Boolean), Date or DisplayString.
type Item struct {
	Value  any
	Params []Param
}

// Param is one parameter of an Item.
type Param struct {
	Key   string
	Value any
}

// Date is a structured-field Date (RFC 9651, section 3.3.7), in seconds
// since the Unix epoch.
type Date int64

// DisplayString is a structured-field Display String (RFC 9651, section
// 3.3.8), decoded.
type DisplayString string

// Param is the value of the parameter named key and whether item has it;
// a key given twice has its last value (RFC 9651, section 4.2.3.2).
func (it Item) Param(key string) (any, bool) {
	for i := len(it.Params) - 1; i >= 0; i-- {
		if it.Params[i].Key == key {
			return it.Params[i].Value, true
		}
	}
	return nil, false
}

// NoWindow is the Window of a QuotaPolicy without w, or of a ServiceLimit
// without t.
const NoWindow = -1

// QuotaPolicy is one item of a RateLimit-Policy field (section 3.1).
type QuotaPolicy struct {
	Name         string // the policy's identifier, a String
	Quota        int64  // q, required
	Unit         string // qu; "" when absent, which means requests
	Window       int64  // w in seconds, > 0; NoWindow when absent
	PartitionKey []byte // pk; nil when absent
}

// ServiceLimit is one item of a RateLimit field (section 4.1).
type ServiceLimit struct {
	Name         string // the identifier of the policy it reports on, a String
	Available    int64  // r, required: the available quota
	Window       int64  // t in seconds, the effective window; NoWindow when absent
	PartitionKey []byte // pk; nil when absent
}

// ParsePolicies reads the RateLimit-Policy field from its field lines
// (several lines are one list, RFC 9651 section 4.2): a non-empty list of
// String items, each with a non-negative Integer q, and where given a
// String qu, a positive Integer w and a Byte Sequence pk. Other parameters
// are comments (section 3.1) and ignored.
func ParsePolicies(lines ...string) ([]QuotaPolicy, error) {
	items, err := parseField("RateLimit-Policy", lines)
	if err != nil {
		return nil, err
	}
	out := make([]QuotaPolicy, len(items))
	for i, it := range items {
		p := QuotaPolicy{Window: NoWindow}
		if p.Name, err = itemName(it); err != nil {
			return nil, fmt.Errorf("RateLimit-Policy item %d: %w", i+1, err)
		}
		if p.Quota, err = intParam(it, "q", true, 0); err != nil {
			return nil, fmt.Errorf("RateLimit-Policy %q: %w", p.Name, err)
		}
		if v, ok := it.Param("qu"); ok {
			if p.Unit, ok = v.(string); !ok {
				return nil, fmt.Errorf("RateLimit-Policy %q: qu is %s, want a String", p.Name, kind(v))
			}
		}
		if p.Window, err = intParam(it, "w", false, 1); err != nil {
			return nil, fmt.Errorf("RateLimit-Policy %q: %w", p.Name, err)
		}
		if p.PartitionKey, err = bytesParam(it, "pk"); err != nil {
			return nil, fmt.Errorf("RateLimit-Policy %q: %w", p.Name, err)
		}
		out[i] = p
	}
	return out, nil
}

// ParseLimits reads the RateLimit field from its field lines: a non-empty
// list of String items (the identifier of a policy, section 4.1), each
// with a non-negative Integer r, and where given a non-negative Integer t
// and a Byte Sequence pk.
func ParseLimits(lines ...string) ([]ServiceLimit, error) {
	items, err := parseField("RateLimit", lines)
	if err != nil {
		return nil, err
	}
	out := make([]ServiceLimit, len(items))
	for i, it := range items {
		l := ServiceLimit{Window: NoWindow}
		if l.Name, err = itemName(it); err != nil {
			return nil, fmt.Errorf("RateLimit item %d: %w", i+1, err)
		}
		if l.Available, err = intParam(it, "r", true, 0); err != nil {
			return nil, fmt.Errorf("RateLimit %q: %w", l.Name, err)
		}
		if l.Window, err = intParam(it, "t", false, 0); err != nil {
			return nil, fmt.Errorf("RateLimit %q: %w", l.Name, err)
		}
		if l.PartitionKey, err = bytesParam(it, "pk"); err != nil {
			return nil, fmt.Errorf("RateLimit %q: %w", l.Name, err)
		}
		out[i] = l
	}
	return out, nil
}

func parseField(name string, lines []string) ([]Item, error) {
	items, err := ParseList(strings.Join(lines, ","))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(items) == 0 {
		return nil, fmt.Errorf("%s: an empty list", name)
	}
	return items, nil
}

func itemName(it Item) (string, error) {
	switch v := it.Value.(type) {
	case string:
		return v, nil
	case Token:
		return "", fmt.Errorf("the policy %s is a Token; it must be a String (%q)", v, string(v))
	default:
		return "", fmt.Errorf("the policy is %s; it must be a String", kind(v))
	}
}

// intParam is the Integer parameter key of it, at least least;
// NoWindow when it is absent and not required.
func intParam(it Item, key string, required bool, least int64) (int64, error) {
	v, ok := it.Param(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("no %s", key)
		}
		return NoWindow, nil
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%s is %s, want an Integer", key, kind(v))
	}
	if n < least {
		return 0, fmt.Errorf("%s=%d, want at least %d", key, n, least)
	}
	return n, nil
}

func bytesParam(it Item, key string) ([]byte, error) {
	v, ok := it.Param(key)
	if !ok {
		return nil, nil
	}
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("%s is %s, want a Byte Sequence", key, kind(v))
	}
	return b, nil
}

// kind names the structured-field type of a value, for errors.
func kind(v any) string {
	switch v.(type) {
	case int64:
		return "an Integer"
	case float64:
		return "a Decimal"
	case string:
		return "a String"
	case Token:
		return "a Token"
	case []byte:
		return "a Byte Sequence"
	case bool:
		return "a Boolean"
	case Date:
		return "a Date"
	case DisplayString:
		return "a Display String"
	case nil:
		return "absent"
	}
	return fmt.Sprintf("a %T", v)
}

// errInnerList: both fields are lists of items; an inner list is valid
// structured-field syntax, but never a quota policy or a service limit.
var errInnerList = errors.New("an inner list, where an item is required")

// ParseList parses s as a structured-field List of Items (RFC 9651,
// sections 4.2 and 4.2.1); an empty s is an empty list.
func ParseList(s string) ([]Item, error) {
	p := &sfParser{s: s}
	p.skip(" ")
	var items []Item
	for !p.done() {
		if p.peek() == '(' {
			return nil, p.fail(errInnerList)
		}
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		p.skip(" \t")
		if p.done() {
			break
		}
		if p.peek() != ',' {
			return nil, p.fail(fmt.Errorf("%q after an item, want ','", p.peek()))
		}
		p.i++
		p.skip(" \t")
		if p.done() {
			return nil, p.fail(errors.New("a trailing ','"))
		}
	}
	return items, nil
}

// sfParser walks one field value.
type sfParser struct {
	s string
	i int
}

func (p *sfParser) done() bool { return p.i >= len(p.s) }
func (p *sfParser) peek() byte { return p.s[p.i] }

func (p *sfParser) skip(set string) {
	for !p.done() && strings.IndexByte(set, p.peek()) >= 0 {
		p.i++
	}
}

func (p *sfParser) fail(err error) error { return fmt.Errorf("at byte %d: %w", p.i, err) }

func (p *sfParser) item() (Item, error) {
	v, err := p.bare()
	if err != nil {
		return Item{}, err
	}
	it := Item{Value: v}
	for !p.done() && p.peek() == ';' {
		p.i++
		p.skip(" ")
		key, err := p.key()
		if err != nil {
			return Item{}, err
		}
		var val any = true
		if !p.done() && p.peek() == '=' {
			p.i++
			if val, err = p.bare(); err != nil {
				return Item{}, err
			}
		}
		it.Params = append(it.Params, Param{key, val})
	}
	return it, nil
}

func (p *sfParser) key() (string, error) {
	start := p.i
	if p.done() || !(isLCAlpha(p.peek()) || p.peek() == '*') {
		return "", p.fail(errors.New("a parameter key must start with a-z or '*'"))
	}
	for !p.done() {
		c := p.peek()
		if !(isLCAlpha(c) || isDigit(c) || c == '_' || c == '-' || c == '.' || c == '*') {
			break
		}
		p.i++
	}
	return p.s[start:p.i], nil
}

func (p *sfParser) bare() (any, error) {
	if p.done() {
		return nil, p.fail(errors.New("the field ends where a value is required"))
	}
	switch c := p.peek(); {
	case c == '-' || isDigit(c):
		return p.number()
	case c == '"':
		return p.str()
	case c == ':':
		return p.bytes()
	case c == '?':
		if p.i+1 < len(p.s) && (p.s[p.i+1] == '0' || p.s[p.i+1] == '1') {
			p.i += 2
			return p.s[p.i-1] == '1', nil
		}
		return nil, p.fail(errors.New("a Boolean is ?0 or ?1"))
	case c == '@':
		p.i++
		n, err := p.number()
		if err != nil {
			return nil, err
		}
		if d, ok := n.(int64); ok {
			return Date(d), nil
		}
		return nil, p.fail(errors.New("a Date is an Integer"))
	case c == '%':
		return p.display()
	case isAlpha(c) || c == '*':
		start := p.i
		for p.i++; !p.done() && (isTChar(p.peek()) || p.peek() == ':' || p.peek() == '/'); p.i++ {
		}
		return Token(p.s[start:p.i]), nil
	default:
		return nil, p.fail(fmt.Errorf("%q cannot start a value", c))
	}
}

// number is RFC 9651 section 4.2.4: at most 15 integer digits, or 12 and
// 1 to 3 decimal ones.
func (p *sfParser) number() (any, error) {
	start := p.i
	if !p.done() && p.peek() == '-' {
		p.i++
	}
	digits, dot := 0, -1
	for ; !p.done(); p.i++ {
		c := p.peek()
		if c == '.' && dot < 0 {
			if digits > 12 {
				return nil, p.fail(errors.New("a Decimal has at most 12 integer digits"))
			}
			dot = digits
			continue
		}
		if !isDigit(c) {
			break
		}
		digits++
	}
	text := p.s[start:p.i]
	switch {
	case digits == 0 || (dot >= 0 && dot == digits):
		return nil, p.fail(fmt.Errorf("%q is not a number", text))
	case dot < 0 && digits > 15:
		return nil, p.fail(errors.New("an Integer has at most 15 digits"))
	case dot >= 0 && digits-dot > 3:
		return nil, p.fail(errors.New("a Decimal has at most 3 decimal digits"))
	case dot < 0:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, p.fail(err)
		}
		return n, nil
	default:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, p.fail(err)
		}
		return f, nil
	}
}

// str is RFC 9651 section 4.2.5.
func (p *sfParser) str() (string, error) {
	var b strings.Builder
	for p.i++; !p.done(); p.i++ {
		switch c := p.peek(); {
		case c == '\\':
			p.i++
			if p.done() || (p.peek() != '"' && p.peek() != '\\') {
				return "", p.fail(errors.New(`a String escapes only '"' and '\'`))
			}
			b.WriteByte(p.peek())
		case c == '"':
			p.i++
			return b.String(), nil
		case c < 0x20 || c > 0x7e:
			return "", p.fail(fmt.Errorf("byte 0x%02x in a String", c))
		default:
			b.WriteByte(c)
		}
	}
	return "", p.fail(errors.New("a String without its closing '\"'"))
}

// bytes is RFC 9651 section 4.2.7; padding may be left out, and non-zero
// pad bits are accepted, as the RFC asks of parsers.
func (p *sfParser) bytes() ([]byte, error) {
	p.i++
	end := strings.IndexByte(p.s[p.i:], ':')
	if end < 0 {
		return nil, p.fail(errors.New("a Byte Sequence without its closing ':'"))
	}
	text := p.s[p.i : p.i+end]
	for i := 0; i < len(text); i++ {
		if c := text[i]; !(isAlpha(c) || isDigit(c) || c == '+' || c == '/' || c == '=') {
			return nil, p.fail(fmt.Errorf("%q in a Byte Sequence", c))
		}
	}
	p.i += end + 1
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(text, "="))
	if err != nil {
		return nil, p.fail(fmt.Errorf("a Byte Sequence: %w", err))
	}
	return b, nil
}

// display is RFC 9651 section 4.2.10.
func (p *sfParser) display() (DisplayString, error) {
	if p.i+1 >= len(p.s) || p.s[p.i+1] != '"' {
		return "", p.fail(errors.New(`a Display String starts with %"`))
	}
	var b []byte
	for p.i += 2; !p.done(); p.i++ {
		switch c := p.peek(); {
		case c == '%':
			if p.i+2 >= len(p.s) {
				return "", p.fail(errors.New("a cut %-escape"))
			}
			n, err := strconv.ParseUint(p.s[p.i+1:p.i+3], 16, 8)
			if err != nil || strings.ToLower(p.s[p.i+1:p.i+3]) != p.s[p.i+1:p.i+3] {
				return "", p.fail(errors.New("a %-escape is two lowercase hex digits"))
			}
			b = append(b, byte(n))
			p.i += 2
		case c == '"':
			p.i++
			if !utf8.Valid(b) {
				return "", p.fail(errors.New("a Display String that is not UTF-8"))
			}
			return DisplayString(b), nil
		case c < 0x20 || c > 0x7e:
			return "", p.fail(fmt.Errorf("byte 0x%02x in a Display String", c))
		default:
			b = append(b, c)
		}
	}
	return "", p.fail(errors.New("a Display String without its closing '\"'"))
}

func isDigit(c byte) bool   { return '0' <= c && c <= '9' }
func isLCAlpha(c byte) bool { return 'a' <= c && c <= 'z' }
func isAlpha(c byte) bool   { return isLCAlpha(c) || ('A' <= c && c <= 'Z') }

// isTChar is RFC 9110's tchar.
func isTChar(c byte) bool {
	return isAlpha(c) || isDigit(c) || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
