package server

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/internal/acl"
)

// redisVersion is the Redis version sluice claims in HELLO and INFO, for
// clients that pick features by version; sluice's own is sluice_version.
const redisVersion = "7.0.0"

// connectionCommands are the commands that tools and client libraries send
// on their own: handshakes, health checks and connection settings.
func connectionCommands() []*command {
	return []*command{
		{name: "ping", minArgs: 1, maxArgs: 2, run: cmdPing, doc: cmdDoc{
			summary: "Returns PONG, or the message.", group: "connection", complexity: "O(1)",
			args: []docArg{{name: "message", typ: "string", optional: true}}, flags: []string{"fast"},
		}},
		{name: "echo", minArgs: 2, maxArgs: 2, run: cmdEcho, doc: cmdDoc{
			summary: "Returns the message.", group: "connection", complexity: "O(1)",
			args: []docArg{{name: "message", typ: "string"}}, flags: []string{"fast"},
		}},
		{name: "quit", minArgs: 1, maxArgs: -1, flags: flagNoAuth, run: cmdQuit, doc: cmdDoc{
			summary: "Closes the connection.", group: "connection", complexity: "O(1)",
			flags: []string{"noscript", "loading", "stale", "fast", "no_auth"},
		}},
		{name: "hello", minArgs: 1, maxArgs: -1, flags: flagNoAuth, run: cmdHello, doc: cmdDoc{
			summary: "Handshakes: RESP2 or RESP3; optionally authenticates and names the connection.", group: "connection", complexity: "O(1)",
			args: []docArg{
				{name: "protover", typ: "integer", optional: true},
				{name: "username-password", typ: "block", token: "AUTH", optional: true, sub: []docArg{
					{name: "username", typ: "string"}, {name: "password", typ: "string"},
				}},
				{name: "clientname", typ: "string", token: "SETNAME", optional: true},
			},
			flags: []string{"noscript", "loading", "stale", "fast", "no_auth"},
		}},
		{name: "auth", minArgs: 2, maxArgs: -1, flags: flagNoAuth, run: cmdAuth, doc: cmdDoc{
			summary: "Authenticates the connection.", group: "connection", complexity: "O(N) where N is the number of passwords defined for the user",
			args:  []docArg{{name: "username", typ: "string", optional: true}, {name: "password", typ: "string"}},
			flags: []string{"noscript", "loading", "stale", "fast", "no_auth"},
		}},
		{name: "select", minArgs: 2, maxArgs: 2, run: cmdSelect, doc: cmdDoc{
			summary: "Selects the database; only 0 exists.", group: "connection", complexity: "O(1)",
			args: []docArg{{name: "index", typ: "integer"}}, flags: []string{"loading", "stale", "fast"},
		}},
		{name: "reset", minArgs: 1, maxArgs: 1, flags: flagNoAuth, run: cmdResetConn, doc: cmdDoc{
			summary: "Resets the connection: name, authentication.", group: "connection", complexity: "O(1)",
			flags: []string{"noscript", "loading", "stale", "fast", "no_auth"},
		}},
		clientCommand(),
	}
}

// clientCommand is CLIENT and its subcommands.
func clientCommand() *command {
	return &command{name: "client", minArgs: 2, maxArgs: -1, doc: cmdDoc{
		summary: "Connection commands.", group: "connection", complexity: "Depends on subcommand.",
	}, subs: subtable(
		&command{name: "setname", minArgs: 3, maxArgs: 3, run: cmdClientSetName, doc: cmdDoc{
			summary: "Sets the connection name.", group: "connection", complexity: "O(1)",
			args: []docArg{{name: "connection-name", typ: "string"}}, flags: []string{"noscript", "loading", "stale"},
		}},
		&command{name: "getname", minArgs: 2, maxArgs: 2, run: cmdClientGetName, doc: cmdDoc{
			summary: "Returns the connection name.", group: "connection", complexity: "O(1)",
			flags: []string{"noscript", "loading", "stale"},
		}},
		&command{name: "id", minArgs: 2, maxArgs: 2, run: cmdClientID, doc: cmdDoc{
			summary: "Returns the connection's id.", group: "connection", complexity: "O(1)",
			flags: []string{"noscript", "loading", "stale"},
		}},
		&command{name: "info", minArgs: 2, maxArgs: 2, run: cmdClientInfo, doc: cmdDoc{
			summary: "Describes this connection.", group: "connection", complexity: "O(1)",
			flags: []string{"noscript", "loading", "stale"},
		}},
		&command{name: "list", minArgs: 2, maxArgs: -1, run: cmdClientList, doc: cmdDoc{
			summary: "Describes every connection; filters are ignored.", group: "connection", complexity: "O(N) where N is the number of client connections",
			flags: []string{"admin", "noscript", "loading", "stale"},
		}},
		&command{name: "setinfo", minArgs: 4, maxArgs: 4, run: cmdClientSetInfo, doc: cmdDoc{
			summary: "Records the client library's name or version.", group: "connection", complexity: "O(1)",
			args: []docArg{{name: "attr", typ: "oneof", sub: []docArg{
				{name: "libname", typ: "string", token: "LIB-NAME"},
				{name: "libver", typ: "string", token: "LIB-VER"},
			}}},
			flags: []string{"noscript", "loading", "stale"},
		}},
		&command{name: "help", minArgs: 2, maxArgs: 2, run: helpText(
			"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"GETNAME", "    Return the name of the current connection.",
			"ID", "    Return the ID of the current connection.",
			"INFO", "    Return information about the current client connection.",
			"LIST", "    Return information about client connections.",
			"SETINFO <LIB-NAME|LIB-VER> <value>", "    Set client library name or version.",
			"SETNAME <name>", "    Assign the name <name> to the current connection.",
		), doc: cmdDoc{summary: "Shows CLIENT help.", group: "connection", complexity: "O(1)"}},
	)}
}

func cmdPing(_ *connState, args [][]byte) (any, error) {
	if len(args) == 2 {
		return args[1], nil
	}
	return replyPong, nil
}

func cmdEcho(_ *connState, args [][]byte) (any, error) { return args[1], nil }

func cmdQuit(c *connState, _ [][]byte) (any, error) {
	c.quit = true
	return replyOK, nil
}

// cmdHello answers HELLO [protover [AUTH username password] [SETNAME name]]
// as Redis 7 does (networking.c helloCommand): protover 2 or 3, else
// NOPROTO; a bad SETNAME or a refused AUTH answers its error and changes
// nothing, the protocol included; otherwise the connection speaks protover
// from this reply on, which is Redis's map (RESP2: a flat array) with the
// protocol in force. HELLO without protover keeps the protocol.
func cmdHello(c *connState, args [][]byte) (any, error) {
	var ver int64
	if len(args) >= 2 {
		v, err := strconv.ParseInt(string(args[1]), 10, 64)
		if err != nil {
			return nil, errProtoVersion
		}
		if v != 2 && v != 3 {
			return nil, errNoProto
		}
		ver = v
	}
	var user, pass, name []byte
	auth, setName := false, false
	for i := 2; i < len(args); i++ {
		more := len(args) - 1 - i
		switch opt := args[i]; {
		case bytes.EqualFold(opt, []byte("auth")) && more >= 2:
			auth, user, pass = true, args[i+1], args[i+2]
			i += 2
		case bytes.EqualFold(opt, []byte("setname")) && more >= 1:
			setName, name = true, args[i+1]
			if !validName(name) {
				return nil, errClientName
			}
			i++
		default:
			return nil, errHelloOption(opt)
		}
	}
	if auth {
		if err := c.authenticate(user, pass); err != nil {
			return nil, err
		}
	}
	if c.refresh() == nil {
		return nil, errHelloNoAuth
	}
	if setName {
		if err := c.setName(name); err != nil {
			return nil, err
		}
	}
	if ver != 0 {
		c.resp3.Store(ver == 3)
	}
	proto := 2
	if c.resp3.Load() {
		proto = 3
	}
	return kv{
		"server", "sluice",
		"version", redisVersion,
		"proto", proto,
		"id", c.id,
		"mode", "standalone",
		"role", "master",
		"modules", []any{},
	}, nil
}

// cmdAuth answers AUTH [username] password like Redis 7.0: the users are
// those of Config.Users (or "default" with RequirePass and "admin" with
// AdminPass); AUTH with the password alone is the default user's, and
// refused as Redis refuses it while that user is nopass.
func cmdAuth(c *connState, args [][]byte) (any, error) {
	switch len(args) {
	case 2:
		if u := c.srv.users.Users().User(acl.DefaultUser); u != nil && u.NoPass() {
			return nil, errNoPassword
		}
		if err := c.authenticate([]byte(acl.DefaultUser), args[1]); err != nil {
			return nil, err
		}
	case 3:
		if err := c.authenticate(args[1], args[2]); err != nil {
			return nil, err
		}
	default:
		return nil, errSyntax
	}
	return replyOK, nil
}

func cmdSelect(_ *connState, args [][]byte) (any, error) {
	db, err := strconv.ParseInt(string(args[1]), 10, 64)
	if err != nil {
		return nil, errNotInteger
	}
	if db != 0 {
		return nil, errDBIndex
	}
	return replyOK, nil
}

// cmdResetConn answers RESET: the name goes, and the connection is
// unauthenticated again: the default user while it is nopass, otherwise
// the client must authenticate again; the protocol is RESP2 again.
func cmdResetConn(c *connState, _ [][]byte) (any, error) {
	c.name.Store(nil)
	c.resp3.Store(false)
	c.authed, c.authName, c.users = false, "", nil
	c.user.Store(nil)
	c.refresh()
	return replyReset, nil
}

func cmdClientSetName(c *connState, args [][]byte) (any, error) {
	if err := c.setName(args[2]); err != nil {
		return nil, err
	}
	return replyOK, nil
}

// setName sets the connection name; an empty name removes it.
func (c *connState) setName(name []byte) error {
	if !validName(name) {
		return errClientName
	}
	if len(name) == 0 {
		c.name.Store(nil)
		return nil
	}
	s := string(name)
	c.name.Store(&s)
	return nil
}

// validName reports whether b is free of spaces, newlines and other
// characters outside '!'..'~', as Redis requires of client names.
func validName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func cmdClientGetName(c *connState, _ [][]byte) (any, error) {
	if p := c.name.Load(); p != nil {
		return *p, nil
	}
	return nil, nil
}

func cmdClientID(c *connState, _ [][]byte) (any, error) { return c.id, nil }

func cmdClientInfo(c *connState, _ [][]byte) (any, error) {
	return c.describe(time.Now()), nil
}

func cmdClientList(c *connState, _ [][]byte) (any, error) {
	now := time.Now()
	var b strings.Builder
	for _, other := range c.srv.clientList() {
		b.WriteString(other.describe(now))
	}
	return b.String(), nil
}

// cmdClientSetInfo answers CLIENT SETINFO LIB-NAME|LIB-VER value (Redis
// 7.2), which go-redis sends after its handshake.
func cmdClientSetInfo(c *connState, args [][]byte) (any, error) {
	attr := strings.ToLower(string(args[2]))
	var dst *atomicString
	switch attr {
	case "lib-name":
		dst = &c.libName
	case "lib-ver":
		dst = &c.libVer
	default:
		return nil, errSetInfoOption(args[2])
	}
	if !validName(args[3]) {
		return nil, errSetInfoValue(attr)
	}
	v := string(args[3])
	dst.Store(&v)
	return replyOK, nil
}

// describe is the connection's line of CLIENT LIST and CLIENT INFO, in
// Redis's field=value format.
func (c *connState) describe(now time.Time) string {
	var b strings.Builder
	field := func(k, v string) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
	}
	load := func(p *atomicString) string {
		if s := p.Load(); s != nil {
			return *s
		}
		return ""
	}
	cmd := "NULL"
	if last := c.lastCmd.Load(); last != nil {
		cmd = last.name
	}
	idle := now.Sub(time.Unix(0, c.lastAt.Load()))
	field("id", strconv.FormatInt(c.id, 10))
	field("addr", c.addr)
	field("laddr", c.laddr)
	field("name", load(&c.name))
	field("age", strconv.FormatInt(int64(now.Sub(c.created)/time.Second), 10))
	field("idle", strconv.FormatInt(int64(max(idle, 0)/time.Second), 10))
	field("flags", "N")
	field("db", "0")
	field("multi", "-1")
	field("cmd", cmd)
	field("user", c.userName())
	field("lib-name", load(&c.libName))
	field("lib-ver", load(&c.libVer))
	resp := "2"
	if c.resp3.Load() {
		resp = "3"
	}
	field("resp", resp)
	b.WriteByte('\n')
	return b.String()
}

// helpText returns the handler of a HELP subcommand.
func helpText(lines ...string) handler {
	return func(*connState, [][]byte) (any, error) { return lines, nil }
}
