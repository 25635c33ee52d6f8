package acl

import (
	"slices"
	"strings"
)

// Access is what a command does with its keys: Read, Write or both. A key
// pattern grants the access it was written with (~ both, %R~ read, %W~
// write), and a key is allowed when one pattern grants all the access the
// command needs, as in Redis.
type Access uint8

// The accesses.
const (
	Read Access = 1 << iota
	Write
	ReadWrite = Read | Write
)

// The categories sluice defines. Connection commands are always allowed:
// they concern only the client's own connection (PING, AUTH, CLIENT
// SETNAME, COMMAND DOCS ...), reveal nothing of other tenants and change
// nothing they share, and client libraries send them on their own.
const (
	CatLimit      = "limit"      // take and peek
	CatSlot       = "slot"       // concurrency slots
	CatAdjust     = "adjust"     // corrections after the fact
	CatAdmin      = "admin"      // change state or limits for every client, or see users
	CatRead       = "read"       // read-only server state: policies, hot keys, INFO
	CatConnection = "connection" // the connection itself; always allowed
	CatAll        = "all"        // every command
)

// categoryNames are the categories of ACL CAT, in that order.
var categoryNames = []string{CatLimit, CatSlot, CatAdjust, CatAdmin, CatRead, CatConnection}

// spec is one command's entry: its category and what it does to its keys
// (0 for a command without keys).
type spec struct {
	cat  string
	keys Access
}

// commands is every command sluice answers, by lower-case full name
// ("container|sub" for a subcommand). A container with subcommands is
// listed only through them, unless it also runs alone (COMMAND).
var commands = map[string]spec{
	"rl.take":     {CatLimit, ReadWrite},
	"rl.peek":     {CatLimit, Read},
	"rl.mtake":    {CatLimit, ReadWrite},
	"cl.throttle": {CatLimit, ReadWrite},

	"rl.acquire": {CatSlot, ReadWrite},
	"rl.release": {CatSlot, ReadWrite},

	"rl.adjust": {CatAdjust, ReadWrite},

	"rl.reset":      {CatAdmin, ReadWrite},
	"rl.policy|set": {CatAdmin, 0},
	"rl.policy|del": {CatAdmin, 0},
	"acl|load":      {CatAdmin, 0},
	"acl|list":      {CatAdmin, 0},
	"acl|users":     {CatAdmin, 0},
	"acl|log":       {CatAdmin, 0},
	"client|list":   {CatAdmin, 0}, // every connection's address and user

	"rl.policy|get":  {CatRead, 0},
	"rl.policy|list": {CatRead, 0},
	"rl.hotkeys":     {CatRead, 0},
	"rl.regions":     {CatRead, 0},
	"info":           {CatRead, 0},
	"rl.info":        {CatRead, 0},

	"ping":           {CatConnection, 0},
	"echo":           {CatConnection, 0},
	"auth":           {CatConnection, 0},
	"hello":          {CatConnection, 0},
	"quit":           {CatConnection, 0},
	"reset":          {CatConnection, 0},
	"select":         {CatConnection, 0},
	"client|setname": {CatConnection, 0},
	"client|getname": {CatConnection, 0},
	"client|id":      {CatConnection, 0},
	"client|info":    {CatConnection, 0},
	"client|setinfo": {CatConnection, 0},
	"client|help":    {CatConnection, 0},
	"command":        {CatConnection, 0},
	"command|count":  {CatConnection, 0},
	"command|list":   {CatConnection, 0},
	"command|info":   {CatConnection, 0},
	"command|docs":   {CatConnection, 0},
	"command|help":   {CatConnection, 0},
	"config|get":     {CatConnection, 0}, // a few fixed values, no secret
	"config|help":    {CatConnection, 0},
	"acl|whoami":     {CatConnection, 0},
	"acl|cat":        {CatConnection, 0},
	"acl|help":       {CatConnection, 0},
}

// Category returns the category of the command named cmd (lower case,
// "container|sub" for a subcommand), or false for a command this package
// does not know.
func Category(cmd string) (string, bool) {
	s, ok := commands[cmd]
	return s.cat, ok
}

// KeyAccess returns what cmd does with its keys; 0 for a command without
// keys or one this package does not know.
func KeyAccess(cmd string) Access { return commands[cmd].keys }

// Categories returns the names of sluice's categories, without "all".
func Categories() []string { return slices.Clone(categoryNames) }

// CommandsIn returns the commands of category cat (any of them for "all"),
// sorted; nil for an unknown category.
func CommandsIn(cat string) []string {
	if cat != CatAll && !slices.Contains(categoryNames, cat) {
		return nil
	}
	var out []string
	for name, s := range commands {
		if cat == CatAll || s.cat == cat {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// expand returns the commands that the rule name "+name" or "-name" names:
// name itself, and for a container every subcommand of it. It is empty
// for an unknown name.
func expand(name string) []string {
	var out []string
	if _, ok := commands[name]; ok {
		out = append(out, name)
	}
	if !strings.Contains(name, "|") {
		for full := range commands {
			if strings.HasPrefix(full, name) && len(full) > len(name) && full[len(name)] == '|' {
				out = append(out, full)
			}
		}
	}
	return out
}
