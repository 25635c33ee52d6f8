package client

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The kinds of error reply sluice sends, for errors.Is on an *Error.
var (
	// ErrNoPolicy: no policy matches the key ("ERR no policy matches key …").
	ErrNoPolicy = errors.New("sluice: no policy matches the key")
	// ErrInvalid: an argument sluice refused (a cost, delta, ttl or key), or
	// a call this client refused before sending it.
	ErrInvalid = errors.New("sluice: invalid argument")
	// ErrAuth: the connection is not authenticated (NOAUTH, WRONGPASS).
	ErrAuth = errors.New("sluice: authentication required or refused")
	// ErrNotApplicable: the command does not apply to the key's policy
	// (RL.TAKE on a concurrency policy, RL.ACQUIRE on a rate policy …).
	ErrNotApplicable = errors.New("sluice: command does not apply to the key's policy")
)

// Error is an error reply from sluice, its text as sent ("ERR cost must
// be a positive integer"). errors.Is matches it against the sentinels
// above; one that matches none is still an *Error.
type Error struct {
	Msg string
}

func (e *Error) Error() string { return "sluice: " + e.Msg }

// Is reports whether the reply is of the kind target names.
func (e *Error) Is(target error) bool {
	m := e.Msg
	switch target {
	case ErrNoPolicy:
		return strings.HasPrefix(m, "ERR no policy matches")
	case ErrAuth:
		return strings.HasPrefix(m, "NOAUTH") || strings.HasPrefix(m, "WRONGPASS")
	case ErrNotApplicable:
		return strings.Contains(m, " does not apply to ") || strings.Contains(m, " is not supported for policy ")
	case ErrInvalid:
		return strings.HasPrefix(m, "ERR ") && (strings.Contains(m, " must ") ||
			strings.Contains(m, "not an integer") || strings.Contains(m, "wrong number of arguments"))
	}
	return false
}

// replyError turns an error reply into *Error and leaves every other error
// (a broken connection, a timeout, a closed client) as go-redis gave it.
func replyError(err error) error {
	var re redis.Error
	if errors.As(err, &re) && !errors.Is(err, redis.Nil) {
		return &Error{Msg: re.Error()}
	}
	return err
}
