package server

import (
	"strconv"

	"github.com/tidwall/redcon"

	"github.com/sluice-rl/sluice/limit"
)

// simple is a RESP simple string: +OK.
type simple string

const (
	replyOK    simple = "OK"
	replyPong  simple = "PONG"
	replyReset simple = "RESET"
)

// kv is a map reply: keys and values alternate. RESP3 writes it as a map
// (%n, n pairs), RESP2 as the flat array (*2n) Redis sends there.
type kv []any

// set is a set reply: RESP3 ~n, RESP2 *n. Redis uses it for command flags,
// ACL categories and tips in COMMAND INFO and COMMAND DOCS.
type set []any

// reply appends one RESP reply to b: err when it is not nil, else v, in
// RESP3 when resp3 is set (the connection sent HELLO 3), else in RESP2. It
// is the only function that turns handler results into RESP, and it reports
// whether it wrote an error. The mapping:
//
//	error          -> -ERR ... (through errorLine), also inside arrays
//	nil            -> $-1 (null bulk); RESP3: _
//	simple         -> +text
//	string, []byte -> $bulk
//	int, int64     -> :n
//	bool           -> :1 or :0 (as Redis, also in RESP3)
//	*limit.Result  -> the six-element RL.TAKE array
//	*acquired      -> the seven-element RL.ACQUIRE array
//	[]string       -> array of bulks
//	[]any          -> array, each element by these rules
//	kv             -> RESP3 map %n; RESP2 the flat array
//	set            -> RESP3 set ~n; RESP2 an array
//
// Any other type is a bug; it is answered with ERR internal error rather
// than a malformed reply.
func reply(b []byte, v any, err error, resp3 bool) (_ []byte, isErr bool) {
	if err != nil {
		return redcon.AppendError(b, errorLine(err)), true
	}
	var elems []any
	switch v := v.(type) {
	case nil:
		if resp3 {
			return append(b, "_\r\n"...), false
		}
		b = redcon.AppendNull(b)
	case error:
		return redcon.AppendError(b, errorLine(v)), true
	case simple:
		b = redcon.AppendString(b, string(v))
	case string:
		b = redcon.AppendBulkString(b, v)
	case []byte:
		b = redcon.AppendBulk(b, v)
	case int:
		b = redcon.AppendInt(b, int64(v))
	case int64:
		b = redcon.AppendInt(b, v)
	case bool:
		if v {
			b = redcon.AppendInt(b, 1)
		} else {
			b = redcon.AppendInt(b, 0)
		}
	case *limit.Result:
		b = appendResult(b, v)
	case *acquired:
		b = appendAcquired(b, v)
	case []string:
		b = redcon.AppendArray(b, len(v))
		for _, s := range v {
			b = redcon.AppendBulkString(b, s)
		}
	case []any:
		b, elems = redcon.AppendArray(b, len(v)), v
	case kv:
		if resp3 {
			b = appendHeader(b, '%', len(v)/2)
		} else {
			b = redcon.AppendArray(b, len(v))
		}
		elems = v
	case set:
		if resp3 {
			b = appendHeader(b, '~', len(v))
		} else {
			b = redcon.AppendArray(b, len(v))
		}
		elems = v
	default:
		return redcon.AppendError(b, string(errInternal)), true
	}
	for _, e := range elems {
		var bad bool
		if b, bad = reply(b, e, nil, resp3); bad {
			isErr = true
		}
	}
	return b, isErr
}

// appendHeader appends an aggregate's header: kind ('%', '~') and n.
func appendHeader(b []byte, kind byte, n int) []byte {
	b = append(b, kind)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// appendResult appends the RL.TAKE / RL.PEEK reply:
//
//  1. allowed         integer 1 or 0
//  2. limit           integer
//  3. remaining       integer
//  4. retry_after_ms  integer, -1 when allowed
//  5. reset_after_ms  integer
//  6. decided_by      bulk string
func appendResult(b []byte, r *limit.Result) []byte {
	return appendFields(redcon.AppendArray(b, 6), r)
}

// appendFields appends appendResult's six elements, without the array's
// header.
func appendFields(b []byte, r *limit.Result) []byte {
	allowed := int64(0)
	if r.Allowed {
		allowed = 1
	}
	b = redcon.AppendInt(b, allowed)
	b = redcon.AppendInt(b, r.Limit)
	b = redcon.AppendInt(b, r.Remaining)
	b = redcon.AppendInt(b, r.RetryAfterMs)
	b = redcon.AppendInt(b, r.ResetAfterMs)
	return redcon.AppendBulkString(b, r.DecidedBy)
}
