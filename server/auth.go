package server

import (
	"io"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/internal/acl"
)

// Users and permissions come from Server.users (internal/acl): the
// "default" and "admin" users of RequirePass and AdminPass, or an ACL file.
// A connection keeps the name of the user it authenticated as and looks it
// up again whenever the List in force changes, so a reload applies changed
// permissions to open connections at their next command, as Redis does; a
// connection whose user the reload deleted is closed (UsersChanged, or at
// its next command). A connection that never authenticated is the
// "default" user while that user is on and nopass, as in Redis.

// aclContext is the ACL LOG context of every refusal on this door: the
// command was sent by the client itself, not from a script or MULTI.
const aclContext = "toplevel"

// refresh returns the connection's user under the List in force, or nil
// when the connection must authenticate first. It sets c.quit when the user
// the connection authenticated as no longer exists.
func (c *connState) refresh() *acl.User {
	l := c.srv.users.Users()
	if l == c.users {
		return c.user.Load()
	}
	c.users = l
	var u *acl.User
	if c.authed {
		if u = l.User(c.authName); u == nil {
			c.quit = true // deleted: Redis disconnects its clients
		}
	} else {
		u = l.Default()
	}
	c.user.Store(u)
	return u
}

// authenticate makes the connection user's if pass is one of that user's
// passwords, for AUTH and HELLO ... AUTH. acl.List.Authenticate compares in
// constant time whichever user is named. A failed attempt leaves the
// connection as it was and is logged for ACL LOG under the name tried.
func (c *connState) authenticate(user, pass []byte) error {
	l := c.srv.users.Users()
	u, ok := l.Authenticate(user, pass)
	if !ok {
		c.logDenied(acl.ReasonAuth, "AUTH", string(user))
		return errWrongPass
	}
	c.authed, c.authName, c.users = true, u.Name(), l
	c.user.Store(u)
	return nil
}

// mayRun reports why the connection may not run cmd with args, or nil. It
// is the one permission check of the RESP door, run by resolve before any
// command: NOAUTH before authentication (but for AUTH, HELLO, QUIT and
// RESET), NOPERM for a command the user may not run, and NOPERM for a
// command with any key, at the positions the command table declares
// (firstKey, lastKey, keyStep, as COMMAND INFO publishes them), that the
// user's patterns do not grant: the whole command is refused and nothing
// of it runs. Every refusal but NOAUTH goes to ACL LOG.
func (c *connState) mayRun(cmd *command, args [][]byte) error {
	u := c.refresh()
	if c.quit {
		return errNoAuth
	}
	if u == nil {
		if cmd.flags&flagNoAuth == 0 {
			return errNoAuth
		}
		return nil
	}
	if !u.CanRun(cmd.name) {
		c.lastCmd.Store(cmd) // ACL LOG's client-info names the refused command, as Redis's
		c.logDenied(acl.ReasonCommand, cmd.name, u.Name())
		return respError((&acl.Denied{User: u.Name(), Reason: acl.ReasonCommand, Object: cmd.name}).Error())
	}
	first, last, step := cmd.doc.firstKey, cmd.doc.lastKey, cmd.doc.keyStep
	if first <= 0 || step <= 0 {
		return nil
	}
	if last < 0 {
		last += len(args)
	}
	need := acl.KeyAccess(cmd.name)
	for i := first; i <= last && i < len(args); i += step {
		if !u.CanAccess(args[i], need) {
			c.lastCmd.Store(cmd)
			c.logDenied(acl.ReasonKey, string(args[i]), u.Name())
			return errNoPermKey
		}
	}
	return nil
}

// errNoPermKey is Redis's refusal of a key outside the user's patterns; it
// does not say which key.
const errNoPermKey respError = "NOPERM No permissions to access a key"

// logDenied adds a refusal to ACL LOG.
func (c *connState) logDenied(reason, object, user string) {
	c.srv.users.Log().Add(acl.Entry{
		Reason: reason, Context: aclContext, Object: object, Username: user,
		ClientInfo: strings.TrimSuffix(c.describe(time.Now()), "\n"),
	}, time.Now())
}

// userName is the name of the connection's user, for CLIENT INFO and
// LIST: "default" before authentication, as in Redis.
func (c *connState) userName() string {
	if u := c.user.Load(); u != nil {
		return u.Name()
	}
	return acl.DefaultUser
}

// UsersChanged closes, at once, every connection whose user the List in
// force no longer has; call it after storing a new List in Config.Users.
// Connections of users that remain get the new permissions at their next
// command.
func (s *Server) UsersChanged() {
	l := s.users.Users()
	for _, c := range s.clientList() {
		u := c.user.Load()
		if u == nil || l.User(u.Name()) != nil {
			continue
		}
		s.log.Info("closing the connection of a deleted user", "id", c.id, "user", u.Name())
		if cl, ok := c.w.(io.Closer); ok {
			_ = cl.Close()
		}
	}
}
