package server

// The users a connection can authenticate as. "default" has RequirePass (or
// no password); "admin" exists only when Config.AdminPass is set, and is the
// only user that may run the commands flagged flagAdmin. There is no ACL
// beyond that: admin can do everything default can.
const (
	userDefault = "default"
	userAdmin   = "admin"
)

// errNoPerm answers an admin command run by a connection that is not
// authenticated as admin. NOPERM is Redis ACL's prefix for a command the
// user may not run.
const errNoPerm respError = "NOPERM this command requires the admin user (AUTH admin <password>)"

// authenticate makes the connection user's if pass is that user's password,
// for AUTH and HELLO ... AUTH. Both passwords are compared whichever user is
// named, so timing tells neither which users exist nor anything about a
// password. With no RequirePass the default user takes any password, as
// Redis's "nopass" default user does. A failed attempt leaves the
// connection as it was.
func (c *connState) authenticate(user, pass []byte) error {
	srv := c.srv
	defaultOK := srv.pass.Matches(pass) || srv.cfg.RequirePass == ""
	adminOK := srv.adminPass.Matches(pass)
	switch {
	case string(user) == userDefault && defaultOK:
		c.admin.Store(false)
	case string(user) == userAdmin && adminOK:
		c.admin.Store(true)
	default:
		return errWrongPass
	}
	c.authed = true
	return nil
}

// mayRun reports why the connection may not run cmd, or nil: NOAUTH before
// authentication, NOPERM for an admin command when AdminPass is set and the
// connection is not admin's. Without AdminPass, admin commands are open to
// every authenticated client, as before the admin user existed.
func (c *connState) mayRun(cmd *command) error {
	switch {
	case !c.authed && cmd.flags&flagNoAuth == 0:
		return errNoAuth
	case cmd.flags&flagAdmin != 0 && c.srv.cfg.AdminPass != "" && !c.admin.Load():
		return errNoPerm
	}
	return nil
}

// user is the name of the connection's user, for CLIENT INFO and LIST.
func (c *connState) user() string {
	if c.admin.Load() {
		return userAdmin
	}
	return userDefault
}
