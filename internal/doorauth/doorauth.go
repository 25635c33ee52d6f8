// Package doorauth maps the credentials of the HTTP and gRPC doors to the
// users of internal/acl, so that both doors read one header the same way
// and reach the same users as RESP's AUTH. It parses and authenticates; it
// decides no permission itself (acl.User.Check does), writes no reply and
// must not log: what it returns for ACL LOG never holds a password.
package doorauth

import (
	"encoding/base64"
	"strings"

	"github.com/sluice-rl/sluice/internal/acl"
)

// maxLoggedName bounds a user name kept for ACL LOG, so that a client
// cannot make the log hold long strings of its choice.
const maxLoggedName = 128

// Auth is who a request is: its user, or why it has none.
type Auth struct {
	// User is the user the request runs as; nil when it is refused (HTTP
	// 401, gRPC Unauthenticated).
	User *acl.User
	// Given reports that the request carried credentials of a scheme the
	// doors read (Bearer or Basic).
	Given bool
	// Failed reports that none of them authenticated, which ACL LOG
	// records. User is then nil, unless the List's default user is on and
	// nopass: the request runs as that user, as one without credentials
	// would (see Authenticate).
	Failed bool
	// Name is the user name a failed credential tried, for ACL LOG: the
	// Basic user name, or for a bearer token the name before its colon
	// when the List has such a user, else "default" (so that no part of a
	// bare password is ever logged).
	Name string
}

// Authenticate maps the values of an Authorization header (HTTP), or of
// the "authorization" metadata (gRPC), to a user of l:
//
//	Bearer <user>:<password>  that user, when the password is one of its own;
//	                          else, as below, the whole token as the
//	                          default user's password
//	Bearer <password>         the "default" user (--requirepass), as before
//	                          users existed
//	Basic base64(user:pass)   that user (an empty user name is "default")
//
// The first value that authenticates wins. A value of another scheme is
// ignored, as if absent. Without credentials the request is l.Default():
// the "default" user when it is on and nopass, else nobody. Credentials
// that fail are refused, but for that same nopass default user, whom the
// request then runs as (Failed still set): it is what any request without
// them gets, so nothing is gained by sending wrong ones, and a proxy that
// forwards its client's own Authorization (Traefik's forwardAuth) to a
// door without a password keeps working as before users existed. Passwords are
// compared by acl.List.Authenticate, in constant time; a bearer token with
// a colon is compared both ways whichever succeeds, so the time taken does
// not say which form matched.
func Authenticate(l *acl.List, values []string) Auth {
	var a Auth
	for _, v := range values {
		scheme, cred, _ := strings.Cut(strings.TrimSpace(v), " ")
		cred = strings.TrimSpace(cred)
		var u *acl.User
		var name string
		switch {
		case strings.EqualFold(scheme, "Bearer"):
			u, name = bearer(l, cred)
		case strings.EqualFold(scheme, "Basic"):
			u, name = basic(l, cred)
		default:
			continue
		}
		if u != nil {
			return Auth{User: u, Given: true}
		}
		if !a.Given {
			a = Auth{Given: true, Failed: true, Name: name}
		}
	}
	a.User = l.Default()
	return a
}

func bearer(l *acl.List, token string) (*acl.User, string) {
	name, pass, named := strings.Cut(token, ":")
	var byName *acl.User
	if named && name != "" {
		byName, _ = l.Authenticate([]byte(name), []byte(pass))
	}
	byDefault, _ := l.Authenticate([]byte(acl.DefaultUser), []byte(token))
	switch {
	case byName != nil:
		return byName, ""
	case byDefault != nil:
		return byDefault, ""
	case named && name != "" && l.User(name) != nil:
		return nil, name
	}
	return nil, acl.DefaultUser
}

func basic(l *acl.List, cred string) (*acl.User, string) {
	raw, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(cred); err != nil {
			return nil, ""
		}
	}
	name, pass, ok := strings.Cut(string(raw), ":")
	if !ok {
		return nil, ""
	}
	if name == "" {
		name = acl.DefaultUser
	}
	u, _ := l.Authenticate([]byte(name), []byte(pass))
	if len(name) > maxLoggedName {
		name = name[:maxLoggedName]
	}
	return u, name
}
