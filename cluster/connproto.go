package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// The RESP of the lean connection (conn.go): a writer that encodes a
// command from its argument slice straight into the connection's buffer,
// and a reader of the few reply shapes the store's commands get back — an
// integer, an array of integers, a status, an error. Anything else is a
// protocol error, and the connection that read it is closed: what follows
// it in the socket cannot be trusted to be the next reply.

// maxReplyInts bounds the integers of one array reply: the batch script
// answers 8 a key and a Multi script 1 + 7 a key, so a MaxBatch of 512
// needs 4,096; a length past the bound is garbage, never allocated.
const maxReplyInts = 1 << 20

// errProtocol is the cause of every reply the reader cannot parse.
var errProtocol = errors.New("cluster: RESP protocol error")

// replyError is an error reply of Redis, its text without the leading
// '-'. It is a redis.Error (its RedisError method), so that isRedisReply,
// redis.HasErrorPrefix and go-redis's MOVED, ASK, CLUSTERDOWN, TRYAGAIN,
// LOADING and READONLY tests read it as they read go-redis's own: the text
// is kept whole, and classification stays in errors.go, file and
// fileBatch.
type replyError string

func (e replyError) Error() string { return string(e) }

// RedisError marks replyError as an error reply (redis.Error).
func (replyError) RedisError() {}

// appendCommand appends args as one RESP command, an array of bulk
// strings, to b. Arguments are formatted as go-redis formats them:
// strings and byte slices as they are, integers in decimal, floats in the
// shortest form that reads back the same, booleans as 1 and 0. Any other
// type is an error (b is then returned unchanged), never a panic.
func appendCommand(b []byte, args []any) ([]byte, error) {
	start := len(b)
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for i, a := range args {
		var ok bool
		if b, ok = appendArg(b, a); !ok {
			return b[:start], fmt.Errorf("cluster: argument %d of %v: cannot send a %T", i, args[0], a)
		}
	}
	return b, nil
}

// appendArg appends a as a bulk string; ok is false for a type it does not
// send.
func appendArg(b []byte, a any) (_ []byte, ok bool) {
	switch v := a.(type) {
	case nil:
		return appendBulk(b, ""), true
	case string:
		return appendBulk(b, v), true
	case []byte:
		return appendBulk(b, v), true
	case int:
		return appendBulkInt(b, int64(v)), true
	case int64:
		return appendBulkInt(b, v), true
	case int32:
		return appendBulkInt(b, int64(v)), true
	case int16:
		return appendBulkInt(b, int64(v)), true
	case int8:
		return appendBulkInt(b, int64(v)), true
	case uint8:
		return appendBulkInt(b, int64(v)), true
	case uint16:
		return appendBulkInt(b, int64(v)), true
	case uint32:
		return appendBulkInt(b, int64(v)), true
	case uint:
		return appendBulkUint(b, uint64(v)), true
	case uint64:
		return appendBulkUint(b, v), true
	case time.Duration:
		return appendBulkInt(b, int64(v)), true
	case float64:
		return appendBulkFloat(b, v), true
	case float32:
		return appendBulkFloat(b, float64(v)), true
	case bool:
		if v {
			return appendBulk(b, "1"), true
		}
		return appendBulk(b, "0"), true
	}
	return b, false
}

// appendBulk appends s as a RESP bulk string: its length, then its
// bytes. The integer and float forms below format into a stack buffer
// and hand the digits here, so that every bulk string is framed once.
func appendBulk[S string | []byte](b []byte, s S) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// appendBulkInt appends n in decimal as a bulk string, its length
// counted before it is written, so that nothing is formatted twice.
func appendBulkInt(b []byte, n int64) []byte {
	var d [20]byte
	return appendBulk(b, strconv.AppendInt(d[:0], n, 10))
}

func appendBulkUint(b []byte, n uint64) []byte {
	var d [20]byte
	return appendBulk(b, strconv.AppendUint(d[:0], n, 10))
}

func appendBulkFloat(b []byte, f float64) []byte {
	var d [32]byte
	return appendBulk(b, strconv.AppendFloat(d[:0], f, 'f', -1, 64))
}

// readLine returns the next line of r without its CRLF. A line longer
// than r's buffer is a protocol error: no reply of the store's commands
// comes near it.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fmt.Errorf("%w: reply line longer than %d bytes", errProtocol, r.Size())
	case err != nil:
		return nil, err
	case len(line) < 3 || line[len(line)-2] != '\r':
		return nil, fmt.Errorf("%w: line %q", errProtocol, line)
	}
	return line[:len(line)-2], nil
}

// parseInt parses a RESP integer: an optional '-' and decimal digits,
// nothing else, within int64.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch {
	case neg && n <= 1<<63:
		return -int64(n), true // -(1<<63) wraps to itself: math.MinInt64
	case !neg && n < 1<<63:
		return int64(n), true
	}
	return 0, false
}

// readInts reads one reply that is an array of integers, appending them
// to dst[:0]. An error reply is returned as a replyError, with the
// connection still in step; any other error means it is not.
func readInts(r *bufio.Reader, dst []int64) ([]int64, error) {
	line, err := readLine(r)
	if err != nil {
		return dst[:0], err
	}
	switch line[0] {
	case '-':
		return dst[:0], replyError(line[1:])
	case '*':
	default:
		return dst[:0], fmt.Errorf("%w: want an array of integers, got %q", errProtocol, line)
	}
	n, ok := parseInt(line[1:])
	if !ok || n < 0 || n > maxReplyInts {
		return dst[:0], fmt.Errorf("%w: array length %q", errProtocol, line[1:])
	}
	dst = dst[:0]
	if cap(dst) < int(n) {
		dst = make([]int64, 0, n)
	}
	for range n {
		v, err := readInt(r)
		if err != nil {
			if isRedisReply(err) { // an error inside an array: not a shape we read
				err = fmt.Errorf("%w: error %q inside an array", errProtocol, err.Error())
			}
			return dst[:0], err
		}
		dst = append(dst, v)
	}
	return dst, nil
}

// readInt reads one integer reply, or an error reply as a replyError.
func readInt(r *bufio.Reader) (int64, error) {
	line, err := readLine(r)
	if err != nil {
		return 0, err
	}
	switch line[0] {
	case ':':
		if v, ok := parseInt(line[1:]); ok {
			return v, nil
		}
	case '-':
		return 0, replyError(line[1:])
	}
	return 0, fmt.Errorf("%w: want an integer, got %q", errProtocol, line)
}

// maxBulkReply bounds the one bulk string reply the lean connection
// reads: FUNCTION LOAD's library name (sluice_ and 12 hex digits).
const maxBulkReply = 512

// readBulk reads one bulk string reply of at most maxBulkReply bytes (the
// library name FUNCTION LOAD answers), or an error reply as a replyError.
func readBulk(r *bufio.Reader) (string, error) {
	line, err := readLine(r)
	if err != nil {
		return "", err
	}
	switch line[0] {
	case '-':
		return "", replyError(line[1:])
	case '$':
	default:
		return "", fmt.Errorf("%w: want a bulk string, got %q", errProtocol, line)
	}
	n, ok := parseInt(line[1:])
	if !ok || n < 0 || n > maxBulkReply {
		return "", fmt.Errorf("%w: bulk length %q", errProtocol, line[1:])
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return "", fmt.Errorf("%w: bulk string of %d bytes not ended by CRLF", errProtocol, n)
	}
	return string(buf[:n]), nil
}

// readStatus reads a status reply (+OK), or an error reply as a
// replyError.
func readStatus(r *bufio.Reader) error {
	line, err := readLine(r)
	if err != nil {
		return err
	}
	switch line[0] {
	case '+':
		return nil
	case '-':
		return replyError(line[1:])
	}
	return fmt.Errorf("%w: want a status, got %q", errProtocol, line)
}
