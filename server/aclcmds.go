package server

import (
	"bytes"
	"strconv"
	"time"

	"github.com/sluice-rl/sluice/internal/acl"
)

// errNoACLFile answers ACL LOAD when sluice was started without --aclfile,
// in Redis's words for the same case.
const errNoACLFile respError = "ERR This Redis instance is not configured to use an ACL file. Start sluice with --aclfile FILE to define users in one."

// aclCommand is ACL and the subcommands sluice answers. Who may run each is
// internal/acl's table: WHOAMI, CAT and HELP are connection commands,
// always allowed; LIST, USERS, LOG and LOAD are @admin.
func aclCommand() *command {
	return &command{name: "acl", minArgs: 2, maxArgs: -1, doc: cmdDoc{
		summary: "Users and permissions.", group: "server", complexity: "Depends on subcommand.",
	}, subs: subtable(
		aclSub("whoami", 2, cmdACLWhoAmI, false, cmdDoc{
			summary: "Returns the authenticated username of the current connection.", complexity: "O(1)",
		}),
		aclSub("users", 2, cmdACLUsers, true, cmdDoc{summary: "Lists all ACL users.", complexity: aclPerUser}),
		aclSub("list", 2, cmdACLList, true, cmdDoc{
			summary: "Dumps the effective rules in ACL file format; passwords as SHA-256 digests only.", complexity: aclPerUser,
		}),
		aclSub("log", 3, cmdACLLog, true, cmdDoc{
			summary:    "Lists recent security events generated due to commands rejected by ACL rules.",
			complexity: "O(N) with N being the number of entries shown.",
			args: []docArg{{name: "operation", typ: "oneof", optional: true, sub: []docArg{
				{name: "count", typ: "integer"}, {name: "reset", typ: "pure-token", token: "RESET"},
			}}},
		}),
		aclSub("load", 2, cmdACLLoad, true, cmdDoc{summary: "Reloads the rules from the configured ACL file.", complexity: aclPerUser}),
		aclSub("cat", 3, cmdACLCat, false, cmdDoc{
			summary:    "Lists the ACL categories, or the commands inside a category.",
			complexity: "O(1) since the categories and commands are a fixed set.",
			args:       []docArg{{name: "category", typ: "string", optional: true}},
		}),
		&command{name: "help", minArgs: 2, maxArgs: 2, run: helpText(
			"ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"CAT [<category>]", "    List all commands that belong to <category>, or all command categories",
			"    when no category is specified.",
			"LIST", "    Show users details in config file format.",
			"LOAD", "    Reload users from the ACL file.",
			"LOG [<count> | RESET]", "    Show the ACL log entries.",
			"USERS", "    List all the registered usernames.",
			"WHOAMI", "    Return the current connection username.",
		), doc: cmdDoc{summary: "Shows ACL help.", group: "server", complexity: "O(1)"}},
	)}
}

// aclPerUser is the complexity of the ACL subcommands that go through
// every configured user.
const aclPerUser = "O(N). Where N is the number of configured users."

// aclSub is the subcommand ACL name, run by run, that takes at most
// maxArgs arguments in all (the command's name and its own included) and
// is documented as doc in group server with the flags noscript, loading
// and stale, led by admin for one of the @admin subcommands.
func aclSub(name string, maxArgs int, run handler, admin bool, doc cmdDoc) *command {
	doc.group = "server"
	doc.flags = []string{"noscript", "loading", "stale"}
	if admin {
		doc.flags = append([]string{"admin"}, doc.flags...)
	}
	return &command{name: name, minArgs: 2, maxArgs: maxArgs, run: run, doc: doc}
}

func cmdACLWhoAmI(c *connState, _ [][]byte) (any, error) { return c.userName(), nil }

func cmdACLUsers(c *connState, _ [][]byte) (any, error) { return c.srv.users.Users().Names(), nil }

func cmdACLList(c *connState, _ [][]byte) (any, error) { return c.srv.users.Users().Describe(), nil }

// cmdACLLog answers ACL LOG [count | RESET] with Redis 7.2's entries, newest
// first, each a map (RESP2: a flat field/value array): count, reason
// (command, key or auth), context, object (the command, the key, or AUTH),
// username, age-seconds (a bulk string in both protocols, where Redis 7
// sends a RESP3 double), client-info, entry-id, timestamp-created,
// timestamp-last-updated (unix ms).
func cmdACLLog(c *connState, args [][]byte) (any, error) {
	log := c.srv.users.Log()
	n := 10 // Redis's default
	if len(args) == 3 {
		if bytes.EqualFold(args[2], []byte("reset")) {
			log.Reset()
			return replyOK, nil
		}
		v, err := strconv.ParseInt(string(args[2]), 10, 64)
		if err != nil || v < 0 {
			return nil, errNotInteger
		}
		n = int(min(v, acl.DefaultLogLen))
	}
	now := time.Now()
	entries := log.Entries(n)
	out := make([]any, len(entries))
	for i, e := range entries {
		out[i] = kv{
			"count", e.Count,
			"reason", e.Reason,
			"context", e.Context,
			"object", e.Object,
			"username", e.Username,
			"age-seconds", strconv.FormatFloat(now.Sub(e.Created).Seconds(), 'f', 3, 64),
			"client-info", e.ClientInfo,
			"entry-id", e.ID,
			"timestamp-created", e.Created.UnixMilli(),
			"timestamp-last-updated", e.Updated.UnixMilli(),
		}
	}
	return out, nil
}

// cmdACLLoad answers ACL LOAD: the users of the ACL file replace those in
// force, or, when the file is bad, stay as they were and the reply says why
// (file:line and the rule, never a password).
func cmdACLLoad(c *connState, _ [][]byte) (any, error) {
	if c.srv.cfg.LoadUsers == nil {
		return nil, errNoACLFile
	}
	if err := c.srv.cfg.LoadUsers(); err != nil {
		return nil, respError("ERR " + err.Error())
	}
	c.srv.UsersChanged()
	return replyOK, nil
}

// cmdACLCat answers ACL CAT [category]: sluice's categories, or the
// commands in one.
func cmdACLCat(_ *connState, args [][]byte) (any, error) {
	if len(args) == 2 {
		return acl.Categories(), nil
	}
	cat := string(bytes.ToLower(args[2]))
	cmds := acl.CommandsIn(cat)
	if cmds == nil {
		return nil, respError("ERR Unknown category '" + clip(args[2], 128) + "'")
	}
	return cmds, nil
}
