package server

import (
	"errors"
	"strings"

	"github.com/sluice-rl/sluice/limit"
)

// respError is an error whose text is the exact RESP error line, without the
// leading '-' and the trailing CRLF.
type respError string

func (e respError) Error() string { return string(e) }

// The RESP error texts. Clients and tests match these byte for byte; most
// are Redis 7.0's own wording so that tools written for Redis behave alike.
// A refused cost or key is edge's error (edge.ErrCost, edge.Keys), the
// same words at every door, answered after "ERR " by errorLine.
const (
	errInternal       respError = "ERR internal error"
	errSyntax         respError = "ERR syntax error"
	errNotInteger     respError = "ERR value is not an integer or out of range"
	errDBIndex        respError = "ERR DB index is out of range"
	errNoAuth         respError = "NOAUTH Authentication required."
	errWrongPass      respError = "WRONGPASS invalid username-password pair or user is disabled."
	errNoPassword     respError = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	errHelloNoAuth    respError = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	errNoProto        respError = "NOPROTO unsupported protocol version"
	errProtoVersion   respError = "ERR Protocol version is not an integer or out of range"
	errClientName     respError = "ERR Client names cannot contain spaces, newlines or special characters."
	errShuttingDown   respError = "ERR server is shutting down"
	errNoRegion       respError = "ERR this instance has no region: start it with --region NAME and --home-cluster or --home-redis"
	errMaxClientsLine           = "-ERR max number of clients reached\r\n"

	// Protocol errors end the connection; the guard writes them itself.
	errProtoTooLarge  = "ERR Protocol error: request too large"
	errProtoMultiBulk = "ERR Protocol error: invalid multibulk length"
	errProtoBulk      = "ERR Protocol error: invalid bulk length"
	errProtoExpected  = "ERR Protocol error: expected '$', got '"
)

// Error texts that carry a value.
func errArity(name string) respError {
	return respError("ERR wrong number of arguments for '" + name + "' command")
}

func errUnknownSubcommand(sub []byte, parent string) respError {
	return respError("ERR unknown subcommand '" + clip(sub, 128) + "'. Try " + strings.ToUpper(parent) + " HELP.")
}

func errHelloOption(opt []byte) respError {
	return respError("ERR Syntax error in HELLO option '" + clip(opt, 128) + "'")
}

func errSetInfoOption(opt []byte) respError {
	return respError("ERR Unrecognized option '" + clip(opt, 128) + "'")
}

func errSetInfoValue(attr string) respError {
	return respError("ERR " + attr + " cannot contain spaces, newlines or special characters.")
}

// errUnknownCommand is Redis 7's text: the name as sent (at most 128
// bytes), then quoted arguments while they fit in 128 bytes, the last one
// cut to fit.
func errUnknownCommand(args [][]byte) respError {
	var quoted []byte
	for _, a := range args[1:] {
		if len(quoted) >= 128 {
			break
		}
		quoted = append(quoted, '\'')
		quoted = append(quoted, a[:min(len(a), 128-len(quoted)+1)]...)
		quoted = append(quoted, '\'', ' ')
	}
	return respError("ERR unknown command '" + clip(args[0], 128) + "', with args beginning with: " + oneLine(string(quoted)))
}

// decisionError is the error of one batched decision; it remembers the key
// so that the reply can name it.
type decisionError struct {
	key string
	err error
}

func (e *decisionError) Error() string { return e.err.Error() }
func (e *decisionError) Unwrap() error { return e.err }

// errorLine maps any error to the text of its RESP error reply (without the
// leading '-'). It is the one place where errors become replies: our own
// texts pass unchanged, a missing policy names the key, and anything else
// becomes "ERR " and the error's text on a single line.
func errorLine(err error) string {
	var re respError
	if errors.As(err, &re) {
		return oneLine(string(re))
	}
	if errors.Is(err, limit.ErrNoPolicy) {
		var de *decisionError
		if errors.As(err, &de) {
			return "ERR no policy matches key '" + oneLine(de.key) + "'"
		}
		return "ERR " + oneLine(limit.ErrNoPolicy.Error())
	}
	return "ERR " + oneLine(err.Error())
}

// oneLine replaces CR and LF with spaces, as Redis does for error replies.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	b := []byte(s)
	for i, c := range b {
		if c == '\r' || c == '\n' {
			b[i] = ' '
		}
	}
	return string(b)
}

// clip returns at most max bytes of b as a single line.
func clip(b []byte, max int) string {
	if len(b) > max {
		b = b[:max]
	}
	return oneLine(string(b))
}
