package rls

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/sluice-rl/sluice/internal/acl"
	"github.com/sluice-rl/sluice/internal/doorauth"
)

// Users and permissions (Config.Users, internal/acl) apply in two steps,
// as on the HTTP door. The interceptor authenticates every call by its
// "authorization" metadata (doorauth: Bearer <password> for the default
// user, Bearer <user>:<password>, Basic; Envoy sends it by the filter's
// initial_metadata), against the List in force at that moment, so a
// reload applies to the next call; a call without credentials is the
// default user while that user is on and nopass, else Unauthenticated.
// ShouldRateLimit then, once every descriptor has its key and its counter
// (a share_threshold rule counts on another key), and before anything is
// decided, checks every descriptor, matched by a rule or not: a descriptor
// with hits_addend 0 runs rl.peek (the user needs read access to its key),
// every other rl.take (read and write), on the key it names and on the
// counter it would spend. One key outside the user's patterns refuses the
// whole call with PermissionDenied (Redis's NOPERM text) and spends
// nothing. Refusals go to ACL LOG with the context "grpc", but for a call
// that carried no credentials at all (Redis does not log NOAUTH either).

// aclContext is the ACL LOG context of this door's refusals.
const aclContext = "grpc"

// userKey is a call context's key of its authenticated user.
type userKey struct{}

// authenticate returns ctx with the call's user, or Unauthenticated.
func (s *Server) authenticate(ctx context.Context) (context.Context, error) {
	// Only the one key: FromIncomingContext would copy every metadata.
	a := doorauth.Authenticate(s.users.Users(), metadata.ValueFromIncomingContext(ctx, "authorization"))
	if a.Failed {
		s.logDenied(ctx, acl.ReasonAuth, "AUTH", a.Name)
	}
	if a.User == nil {
		return nil, status.Error(codes.Unauthenticated, "authentication required: metadata authorization: Basic user:password, or Bearer user:password or the default password")
	}
	if s.authed {
		p, _ := peer.FromContext(ctx)
		markAuthenticated(p)
	}
	return context.WithValue(ctx, userKey{}, a.User), nil
}

// credentialsRequired reports whether a call without credentials is
// refused by the users in force.
func (s *Server) credentialsRequired() bool { return s.users.Users().Default() == nil }

// permit returns PermissionDenied when the call's user may not take (or
// peek) the key of one descriptor of ds, or the counter it spends; nil
// when it may all of them.
func (s *Server) permit(ctx context.Context, ds []descriptor) error {
	u, _ := ctx.Value(userKey{}).(*acl.User)
	if u == nil { // the interceptor authenticates every call; fail closed if not
		return status.Error(codes.Unauthenticated, "authentication required")
	}
	for i := range ds {
		d := &ds[i]
		cmd := "rl.take"
		if d.peek {
			cmd = "rl.peek"
		}
		if !u.CanRun(cmd) {
			return s.denied(ctx, &acl.Denied{User: u.Name(), Reason: acl.ReasonCommand, Object: cmd})
		}
		need := acl.KeyAccess(cmd)
		for _, k := range [2]string{d.key, d.named} {
			if k != "" && !u.CanAccess([]byte(k), need) {
				return s.denied(ctx, &acl.Denied{User: u.Name(), Reason: acl.ReasonKey, Object: k})
			}
		}
	}
	return nil
}

func (s *Server) denied(ctx context.Context, d *acl.Denied) error {
	s.logDenied(ctx, d.Reason, d.Object, d.User)
	return status.Error(codes.PermissionDenied, d.Error())
}

// logDenied adds a refusal to ACL LOG; the client is named by its
// address, as CLIENT INFO names a RESP client.
func (s *Server) logDenied(ctx context.Context, reason, object, user string) {
	info := "addr="
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			info += p.Addr.String()
		}
		if p.LocalAddr != nil {
			info += " laddr=" + p.LocalAddr.String()
		}
	}
	info += " door=grpc"
	s.users.Log().Add(acl.Entry{Reason: reason, Context: aclContext, Object: object, Username: user, ClientInfo: info}, time.Now())
}
