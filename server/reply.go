package server

import (
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

// reply writes one RESP reply: err when it is not nil, else v. It is the
// only function that turns handler results into RESP, and it reports whether
// it wrote an error. The mapping:
//
//	error          -> -ERR ... (through errorLine), also inside arrays
//	nil            -> $-1 (null bulk)
//	simple         -> +text
//	string, []byte -> $bulk
//	int, int64     -> :n
//	bool           -> :1 or :0
//	*limit.Result  -> the six-element RL.TAKE array
//	[]string       -> array of bulks
//	[]any          -> array, each element by these rules
//
// Any other type is a bug; it is answered with ERR internal error rather
// than a malformed reply.
func reply(w *redcon.Writer, v any, err error) (isErr bool) {
	if err != nil {
		w.WriteError(errorLine(err))
		return true
	}
	switch v := v.(type) {
	case nil:
		w.WriteNull()
	case error:
		w.WriteError(errorLine(v))
		return true
	case simple:
		w.WriteString(string(v))
	case string:
		w.WriteBulkString(v)
	case []byte:
		w.WriteBulk(v)
	case int:
		w.WriteInt64(int64(v))
	case int64:
		w.WriteInt64(v)
	case bool:
		if v {
			w.WriteInt64(1)
		} else {
			w.WriteInt64(0)
		}
	case *limit.Result:
		writeResult(w, v)
	case []string:
		w.WriteArray(len(v))
		for _, s := range v {
			w.WriteBulkString(s)
		}
	case []any:
		w.WriteArray(len(v))
		for _, e := range v {
			if reply(w, e, nil) {
				isErr = true
			}
		}
	default:
		w.WriteError(string(errInternal))
		return true
	}
	return isErr
}

// writeResult writes the RL.TAKE / RL.PEEK reply:
//
//  1. allowed         integer 1 or 0
//  2. limit           integer
//  3. remaining       integer
//  4. retry_after_ms  integer, -1 when allowed
//  5. reset_after_ms  integer
//  6. decided_by      bulk string
func writeResult(w *redcon.Writer, r *limit.Result) {
	w.WriteArray(6)
	if r.Allowed {
		w.WriteInt64(1)
	} else {
		w.WriteInt64(0)
	}
	w.WriteInt64(r.Limit)
	w.WriteInt64(r.Remaining)
	w.WriteInt64(r.RetryAfterMs)
	w.WriteInt64(r.ResetAfterMs)
	w.WriteBulkString(r.DecidedBy)
}
