package httpfront

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/sluice-rl/sluice/internal/acl"
	"github.com/sluice-rl/sluice/internal/doorauth"
)

// Users and permissions (Config.Users, internal/acl) apply in two steps.
// route authenticates every request before it reads anything else
// (doorauth: Bearer <password> for the default user, Bearer
// <user>:<password>, Basic), against the List in force at that moment, so
// a reload applies to the next request; a request without credentials is
// the default user while that user is on and nopass. Each endpoint then,
// once it has parsed its request and before it decides anything, checks
// the command it runs and every key it names (permit): one key outside
// the user's patterns refuses the whole request, a batch included, and
// nothing is spent. The commands are RESP's: /v1/take and /v1/check run
// rl.take, /v1/adjust rl.adjust, /v1/acquire rl.acquire and /v1/release
// rl.release. A refusal is 401 (no or wrong credentials, with
// WWW-Authenticate) or 403 (authenticated, not permitted: Redis's NOPERM
// text), and goes to ACL LOG with the context "http", but for a request
// that carried no credentials at all (Redis does not log NOAUTH either).

// aclContext is the ACL LOG context of this door's refusals.
const aclContext = "http"

// challenges are the schemes a 401 offers, Bearer first: the form every
// client of this door has used.
var challenges = []string{`Bearer realm="sluice"`, `Basic realm="sluice", charset="UTF-8"`}

// userKey is the request context's key of the authenticated user.
type userKey struct{}

// authenticate returns r with its user in its context, or the 401 answer.
func (s *Server) authenticate(r *http.Request) (*http.Request, *answer) {
	a := doorauth.Authenticate(s.users.Users(), r.Header.Values("Authorization"))
	if a.Failed {
		s.logDenied(r, acl.ReasonAuth, "AUTH", a.Name)
	}
	if a.User != nil {
		return r.WithContext(context.WithValue(r.Context(), userKey{}, a.User)), nil
	}
	ans := fail(http.StatusUnauthorized, "authentication required: Authorization: Basic user:password, or Bearer user:password or the default password")
	h := http.Header{"Www-Authenticate": append([]string(nil), challenges...)}
	if r.Header.Get("Authorization") != "" {
		h["Www-Authenticate"][0] += `, error="invalid_token"`
		ans.body = errorBody{Error: "invalid credentials"}
	}
	ans.header = h
	return nil, &ans
}

// permit reports, as a 403 answer, why the request's user may not run cmd
// on keys; nil when it may. It is called once per request with every key
// the request names, before anything is decided.
func (s *Server) permit(r *http.Request, cmd string, keys ...string) *answer {
	u, _ := r.Context().Value(userKey{}).(*acl.User)
	if u == nil { // route authenticates every request; fail closed if not
		a := fail(http.StatusUnauthorized, "authentication required")
		return &a
	}
	if !u.CanRun(cmd) {
		return s.denied(r, &acl.Denied{User: u.Name(), Reason: acl.ReasonCommand, Object: cmd})
	}
	need := acl.KeyAccess(cmd)
	if need == 0 {
		need = acl.ReadWrite
	}
	for _, k := range keys {
		if !u.CanAccess([]byte(k), need) {
			return s.denied(r, &acl.Denied{User: u.Name(), Reason: acl.ReasonKey, Object: k})
		}
	}
	return nil
}

// userName is the name of the user r authenticated as, "" when it has
// none (a server without users).
func userName(r *http.Request) string {
	if u, _ := r.Context().Value(userKey{}).(*acl.User); u != nil {
		return u.Name()
	}
	return ""
}

func (s *Server) denied(r *http.Request, d *acl.Denied) *answer {
	s.logDenied(r, d.Reason, d.Object, d.User)
	a := fail(http.StatusForbidden, d.Error())
	return &a
}

// logDenied adds a refusal to ACL LOG; the client is named by its
// addresses, as CLIENT INFO names a RESP client.
func (s *Server) logDenied(r *http.Request, reason, object, user string) {
	info := "addr=" + r.RemoteAddr
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		info += " laddr=" + la.String()
	}
	info += " door=http"
	s.users.Log().Add(acl.Entry{Reason: reason, Context: aclContext, Object: object, Username: user, ClientInfo: info}, time.Now())
}
