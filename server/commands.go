package server

import (
	"github.com/sluice-rl/sluice/limit"
)

// handler runs a command that answers by itself. Its value and error go to
// reply().
type handler func(c *connState, args [][]byte) (any, error)

// batcher turns a command into one decision request. The dispatcher collects
// the requests of a whole pipeline into one Decider.Decide call.
type batcher func(c *connState, args [][]byte) (limit.Request, error)

// cmdFlags are properties of a command that the dispatcher acts on.
type cmdFlags uint8

const (
	// flagNoAuth commands run before the client has authenticated.
	flagNoAuth cmdFlags = 1 << iota
	// flagBarrier commands change limiter state, so the requests queued
	// before them are decided first: RL.TAKE k, RL.RESET k, RL.TAKE k keeps
	// its order.
	flagBarrier
	// flagCellReply batch commands answer in CL.THROTTLE's five integers
	// instead of RL.TAKE's six fields.
	flagCellReply
	// flagAdmin marks the commands that change limits or state for every
	// client (RL.RESET, RL.POLICY SET and DEL). It is documentation only:
	// who may run a command is internal/acl's table (category @admin),
	// and a test checks that every command flagged here is in @admin.
	flagAdmin
)

// command is one entry of the command table.
type command struct {
	name    string // lower case; "client|setname" for a subcommand
	minArgs int    // including the command (and subcommand) name
	maxArgs int    // -1: no upper bound
	flags   cmdFlags
	run     handler
	batch   batcher
	subs    commandTable // non-nil for containers such as CLIENT
	doc     cmdDoc
}

// cmdDoc describes a command for COMMAND, COMMAND INFO and COMMAND DOCS.
type cmdDoc struct {
	summary    string
	group      string
	complexity string
	args       []docArg
	flags      []string // COMMAND INFO flags: "fast", "write", ...
	firstKey   int
	lastKey    int
	keyStep    int
}

// docArg is one argument of a COMMAND DOCS entry.
type docArg struct {
	name     string
	typ      string // "key", "integer", "string", "pure-token", ...
	token    string
	optional bool
	multiple bool
	sub      []docArg // the parts of a "block" or the choices of a "oneof"
}

// arity is the command's arity as Redis reports it: n for exactly n
// arguments, -n for at least n.
func (cmd *command) arity() int {
	if cmd.maxArgs == cmd.minArgs {
		return cmd.minArgs
	}
	return -cmd.minArgs
}

// commandTable maps lower-case command names to commands. It is built once
// by New and only read afterwards, so connections share it without locks.
type commandTable map[string]*command

// maxNameLen bounds the command names that lookups consider; no command is
// longer, so longer input is simply unknown.
const maxNameLen = 32

// find returns the command named name, case-insensitively, or nil. It does
// not allocate: the name is lowered into a stack buffer and the map index
// with string(b) is not a conversion the compiler materialises.
func (t commandTable) find(name []byte) *command {
	if len(name) > maxNameLen {
		return nil
	}
	var buf [maxNameLen]byte
	for i, ch := range name {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		buf[i] = ch
	}
	return t[string(buf[:len(name)])]
}

// add registers cmd (and the parent links of its subcommands).
func (t commandTable) add(cmd *command) {
	for _, sub := range cmd.subs {
		sub.name = cmd.name + "|" + sub.name
	}
	t[cmd.name] = cmd
}

// newCommandTable builds the table of every command the server answers.
func newCommandTable() commandTable {
	t := commandTable{}
	for _, cmd := range rateCommands() {
		t.add(cmd)
	}
	for _, cmd := range multiCommands() {
		t.add(cmd)
	}
	t.add(policyCommand())
	for _, cmd := range connectionCommands() {
		t.add(cmd)
	}
	for _, cmd := range serverCommands() {
		t.add(cmd)
	}
	t.add(adjustCommand())
	for _, cmd := range acquireCommands() {
		t.add(cmd)
	}
	t.add(aclCommand())
	return t
}

// subtable builds the subcommand table of a container command.
func subtable(cmds ...*command) commandTable {
	t := commandTable{}
	for _, cmd := range cmds {
		t[cmd.name] = cmd
	}
	return t
}

// resolve finds the command for args and checks, in Redis's order, that it
// exists, that its arity fits and that the client may run it.
func (c *connState) resolve(args [][]byte) (*command, error) {
	if len(args) == 0 {
		return nil, errUnknownCommand([][]byte{nil})
	}
	cmd := c.srv.cmds.find(args[0])
	if cmd == nil {
		return nil, errUnknownCommand(args)
	}
	if cmd.subs != nil && len(args) >= 2 {
		sub := cmd.subs.find(args[1])
		if sub == nil {
			return nil, errUnknownSubcommand(args[1], cmd.name)
		}
		cmd = sub
	}
	if len(args) < cmd.minArgs || (cmd.maxArgs >= 0 && len(args) > cmd.maxArgs) {
		return nil, errArity(cmd.name)
	}
	if err := c.mayRun(cmd, args); err != nil {
		return nil, err
	}
	return cmd, nil
}
