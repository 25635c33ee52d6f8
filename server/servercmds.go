package server

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-rl/sluice/internal/acl"
)

// serverCommands are the introspection commands: COMMAND (redis-cli's
// hints), CONFIG GET (redis-benchmark's start-up) and INFO.
func serverCommands() []*command {
	names := docArg{name: "command-name", typ: "string", optional: true, multiple: true}
	return []*command{
		{name: "command", minArgs: 1, maxArgs: -1, run: cmdCommandAll, doc: cmdDoc{
			summary: "Returns detailed information about all commands.", group: "server",
			complexity: "O(N) where N is the total number of commands", flags: []string{"loading", "stale"},
		}, subs: subtable(
			&command{name: "count", minArgs: 2, maxArgs: 2, run: cmdCommandCount, doc: cmdDoc{
				summary: "Returns a count of commands.", group: "server", complexity: "O(1)",
				flags: []string{"loading", "stale"},
			}},
			&command{name: "list", minArgs: 2, maxArgs: -1, run: cmdCommandList, doc: cmdDoc{
				summary: "Returns a list of command names.", group: "server", complexity: "O(N) where N is the total number of commands",
				flags: []string{"loading", "stale"},
			}},
			&command{name: "info", minArgs: 2, maxArgs: -1, run: cmdCommandInfo, doc: cmdDoc{
				summary: "Returns information about one, multiple or all commands.", group: "server",
				complexity: "O(N) where N is the number of commands to look up", args: []docArg{names},
				flags: []string{"loading", "stale"},
			}},
			&command{name: "docs", minArgs: 2, maxArgs: -1, run: cmdCommandDocs, doc: cmdDoc{
				summary: "Returns documentary information about one, multiple or all commands.", group: "server",
				complexity: "O(N) where N is the number of commands to look up", args: []docArg{names},
				flags: []string{"loading", "stale"},
			}},
			&command{name: "help", minArgs: 2, maxArgs: 2, run: helpText(
				"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
				"(no subcommand)", "    Return details about all commands.",
				"COUNT", "    Return the total number of commands.",
				"DOCS [<command-name> ...]", "    Return documentation about commands.",
				"INFO [<command-name> ...]", "    Return details about commands.",
				"LIST", "    Return a list of all commands.",
			), doc: cmdDoc{summary: "Shows COMMAND help.", group: "server", complexity: "O(1)"}},
		)},
		{name: "config", minArgs: 2, maxArgs: -1, doc: cmdDoc{
			summary: "Configuration commands.", group: "server", complexity: "Depends on subcommand.",
		}, subs: subtable(
			&command{name: "get", minArgs: 3, maxArgs: -1, run: cmdConfigGet, doc: cmdDoc{
				summary: "Returns the effective values of configuration parameters.", group: "server",
				complexity: "O(N) when N is the number of configuration parameters provided",
				args:       []docArg{{name: "parameter", typ: "string", multiple: true}},
				flags:      []string{"admin", "noscript", "loading", "stale"},
			}},
			&command{name: "help", minArgs: 2, maxArgs: 2, run: helpText(
				"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
				"GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
			), doc: cmdDoc{summary: "Shows CONFIG help.", group: "server", complexity: "O(1)"}},
		)},
		{name: "info", minArgs: 1, maxArgs: -1, run: cmdInfo, doc: cmdDoc{
			summary: "Returns information and statistics about the server.", group: "server", complexity: "O(1)",
			args:  []docArg{{name: "section", typ: "string", optional: true, multiple: true}},
			flags: []string{"loading", "stale"},
		}},
		{name: "rl.info", minArgs: 1, maxArgs: -1, run: cmdInfo, doc: cmdDoc{
			summary: "Returns sluice's counters and state, like INFO.", group: "server", complexity: "O(1)",
			args:  []docArg{{name: "section", typ: "string", optional: true, multiple: true}},
			flags: []string{"loading", "stale"},
		}},
	}
}

// sorted returns the table's commands by name.
func (t commandTable) sorted() []*command {
	cmds := make([]*command, 0, len(t))
	for _, cmd := range t {
		cmds = append(cmds, cmd)
	}
	slices.SortFunc(cmds, func(a, b *command) int { return strings.Compare(a.name, b.name) })
	return cmds
}

func cmdCommandAll(c *connState, _ [][]byte) (any, error) {
	cmds := c.srv.cmds.sorted()
	out := make([]any, len(cmds))
	for i, cmd := range cmds {
		out[i] = cmd.info()
	}
	return out, nil
}

func cmdCommandCount(c *connState, _ [][]byte) (any, error) { return len(c.srv.cmds), nil }

func cmdCommandList(c *connState, _ [][]byte) (any, error) {
	var names []string
	for _, cmd := range c.srv.cmds.sorted() {
		names = append(names, cmd.name)
	}
	return names, nil
}

// cmdCommandInfo answers COMMAND INFO [name ...]: an entry per name, null for
// an unknown one; every command when no name is given.
func cmdCommandInfo(c *connState, args [][]byte) (any, error) {
	if len(args) == 2 {
		return cmdCommandAll(c, args)
	}
	out := make([]any, 0, len(args)-2)
	for _, name := range args[2:] {
		if cmd := c.srv.lookupPath(name); cmd != nil {
			out = append(out, cmd.info())
		} else {
			out = append(out, nil)
		}
	}
	return out, nil
}

// cmdCommandDocs answers COMMAND DOCS [name ...]: a map (RESP2: a flat
// array) from name to documentation, skipping unknown names.
func cmdCommandDocs(c *connState, args [][]byte) (any, error) {
	var cmds []*command
	if len(args) == 2 {
		cmds = c.srv.cmds.sorted()
	}
	for _, name := range args[min(2, len(args)):] {
		if cmd := c.srv.lookupPath(name); cmd != nil {
			cmds = append(cmds, cmd)
		}
	}
	out := make(kv, 0, 2*len(cmds))
	for _, cmd := range cmds {
		out = append(out, cmd.name, cmd.docs())
	}
	return out, nil
}

// lookupPath finds "name" or "container|sub".
func (s *Server) lookupPath(name []byte) *command {
	parent, sub, ok := bytes.Cut(name, []byte("|"))
	cmd := s.cmds.find(parent)
	if !ok || cmd == nil {
		return cmd
	}
	if cmd.subs == nil {
		return nil
	}
	return cmd.subs.find(sub)
}

// info is the command's COMMAND INFO entry, as Redis 7 lays it out: name,
// arity, flags, first key, last key, key step, ACL categories, tips, key
// specifications, subcommands. In RESP3 the flags, categories, tips and key
// specifications are sets, and so are absent subcommands, as in Redis.
func (cmd *command) info() []any {
	flags := make(set, len(cmd.doc.flags))
	for i, f := range cmd.doc.flags {
		flags[i] = simple(f)
	}
	var subs any = set{}
	if cmd.subs != nil {
		var list []any
		for _, sub := range sortedSubs(cmd.subs) {
			list = append(list, sub.info())
		}
		subs = list
	}
	return []any{
		cmd.name, cmd.arity(), flags,
		cmd.doc.firstKey, cmd.doc.lastKey, cmd.doc.keyStep,
		cmd.aclCategories(), set{}, set{}, subs,
	}
}

// aclCategories are the command's ACL categories as COMMAND INFO and
// COMMAND DOCS show them (simple strings "@limit"), from internal/acl's
// table; empty for a container that runs only through its subcommands.
func (cmd *command) aclCategories() set {
	cat, ok := acl.Category(cmd.name)
	if !ok {
		return set{}
	}
	return set{simple("@" + cat)}
}

// docs is the command's COMMAND DOCS entry, a map.
func (cmd *command) docs() kv {
	d := kv{
		"summary", cmd.doc.summary,
		"since", "1.0.0",
		"group", cmd.doc.group,
		"complexity", cmd.doc.complexity,
		"acl_categories", cmd.aclCategories(),
	}
	if len(cmd.doc.args) > 0 {
		d = append(d, "arguments", docArgs(cmd.doc.args))
	}
	if cmd.subs != nil {
		var subs kv
		for _, sub := range sortedSubs(cmd.subs) {
			subs = append(subs, sub.name, sub.docs())
		}
		d = append(d, "subcommands", subs)
	}
	return d
}

func sortedSubs(t commandTable) []*command {
	if t == nil {
		return nil
	}
	return t.sorted()
}

// docArgs lays out arguments as COMMAND DOCS does; redis-cli builds its
// hints from them and expects the flags as simple strings.
func docArgs(args []docArg) []any {
	out := make([]any, len(args))
	for i, a := range args {
		m := kv{"name", a.name, "type", a.typ}
		if a.token != "" {
			m = append(m, "token", a.token)
		}
		var flags set
		if a.optional {
			flags = append(flags, simple("optional"))
		}
		if a.multiple {
			flags = append(flags, simple("multiple"))
		}
		if flags != nil {
			m = append(m, "flags", flags)
		}
		if a.sub != nil {
			m = append(m, "arguments", docArgs(a.sub))
		}
		out[i] = m
	}
	return out
}

// cmdConfigGet answers CONFIG GET pattern [pattern ...] from a few fixed
// parameters, a map (RESP2: a flat array). redis-benchmark reads "save" and "appendonly" on start and
// warns when it cannot. A pattern is a glob matched without regard to case,
// as in Redis: `*`, `?` and classes (path.Match's, the same here since no
// name holds a '/'); a malformed one matches nothing.
func cmdConfigGet(c *connState, args [][]byte) (any, error) {
	cfg := c.srv.cfg
	params := [][2]string{
		{"save", ""},
		{"appendonly", "no"},
		{"databases", "1"},
		{"maxclients", strconv.Itoa(cfg.MaxClients)},
		{"timeout", strconv.FormatInt(int64(cfg.IdleTimeout/time.Second), 10)},
	}
	out := kv{}
	for _, p := range params {
		for _, pat := range args[2:] {
			if ok, _ := path.Match(strings.ToLower(string(pat)), p[0]); ok {
				out = append(out, p[0], p[1])
				break
			}
		}
	}
	return out, nil
}

// cmdInfo answers INFO [section ...] in Redis's INFO text format: our
// Server, Clients and Stats sections, then those that Config.Info writes.
// Section names match case-insensitively; "all", "everything" and
// "default" select every section.
func cmdInfo(c *connState, args [][]byte) (any, error) {
	text := c.srv.infoText()
	want := map[string]bool{}
	for _, a := range args[1:] {
		switch s := strings.ToLower(string(a)); s {
		case "all", "everything", "default":
			return text, nil
		default:
			want[s] = true
		}
	}
	if len(want) == 0 {
		return text, nil
	}
	return filterSections(text, want), nil
}

// infoText renders every INFO section.
func (s *Server) infoText() string {
	st := s.Stats()
	var b strings.Builder
	line := func(k, v string) { b.WriteString(k + ":" + v + "\r\n") }
	port := "0"
	if addr := s.Addr(); addr != nil {
		if _, p, err := net.SplitHostPort(addr.String()); err == nil {
			port = p
		}
	}
	up := time.Since(s.started)
	b.WriteString("# Server\r\n")
	line("redis_version", redisVersion)
	line("sluice_version", s.cfg.Version)
	line("redis_mode", "standalone")
	line("os", runtime.GOOS+" "+runtime.GOARCH)
	line("go_version", runtime.Version())
	line("process_id", strconv.Itoa(os.Getpid()))
	line("tcp_port", port)
	line("uptime_in_seconds", strconv.FormatInt(int64(up/time.Second), 10))
	line("uptime_in_days", strconv.FormatInt(int64(up/(24*time.Hour)), 10))
	b.WriteString("\r\n# Clients\r\n")
	line("connected_clients", strconv.FormatInt(st.ConnectedClients, 10))
	line("maxclients", strconv.Itoa(s.cfg.MaxClients))
	b.WriteString("\r\n# Stats\r\n")
	line("total_connections_received", strconv.FormatInt(st.TotalConnections, 10))
	line("total_commands_processed", strconv.FormatInt(st.CommandsProcessed, 10))
	line("rejected_connections", strconv.FormatInt(st.RejectedClients, 10))
	line("total_error_replies", strconv.FormatInt(st.ErrorReplies, 10))
	line("panics", strconv.FormatInt(st.Panics, 10))
	if s.cfg.Info != nil {
		var extra bytes.Buffer
		s.cfg.Info(&extra)
		if extra.Len() > 0 {
			b.WriteString("\r\n")
			b.Write(extra.Bytes())
		}
	}
	return b.String()
}

// filterSections keeps the sections of text whose "# Name" header names
// one of want (lower case).
func filterSections(text string, want map[string]bool) string {
	var b strings.Builder
	keep := false
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, len(text)+1)
	for sc.Scan() {
		l := strings.TrimRight(sc.Text(), "\r")
		if name, ok := strings.CutPrefix(l, "# "); ok {
			keep = want[strings.ToLower(strings.TrimSpace(name))]
			if keep && b.Len() > 0 {
				b.WriteString("\r\n")
			}
		}
		if keep && l != "" {
			b.WriteString(l + "\r\n")
		}
	}
	return b.String()
}
