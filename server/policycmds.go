package server

import (
	"context"
	"time"
)

// PolicyAdmin answers RL.POLICY: the runtime policies, stored in the
// backend and shared by every sluice instance (policy.Runtime).
type PolicyAdmin interface {
	// List returns the policies in force, in match order.
	List() []PolicyInfo
	// Get returns one policy in force as JSON.
	Get(name string) (string, bool)
	// Set validates and stores a runtime policy and puts it in force.
	Set(ctx context.Context, name, json string) error
	// Del removes a runtime policy; it reports whether there was one.
	Del(ctx context.Context, name string) (bool, error)
}

// PolicyInfo is one line of RL.POLICY LIST.
type PolicyInfo struct {
	Name   string
	Source string // "runtime", the config file, or "built-in"
	Hot    string // the hot block in force: off, lease(threshold=500/s) (default), …
}

// policyTimeout bounds RL.POLICY SET and DEL: a write and a read of the
// backend, not on the decision path, so longer than a decision's deadline.
const policyTimeout = 2 * time.Second

const errNoPolicyAdmin respError = "ERR RL.POLICY is not available on this server"

// policyCommand is RL.POLICY LIST | GET name | SET name json | DEL name.
func policyCommand() *command {
	nameArg := docArg{name: "name", typ: "string"}
	return &command{name: "rl.policy", minArgs: 2, maxArgs: -1, doc: cmdDoc{
		summary: "Policies changed at run time, shared by every sluice instance.", group: "rate-limiting", complexity: "Depends on subcommand.",
	}, subs: subtable(
		&command{name: "list", minArgs: 2, maxArgs: 2, run: cmdPolicyList, doc: cmdDoc{
			summary: "Lists the policies in force in match order: an array of [name, n, source, s].", group: "rate-limiting", complexity: "O(N)",
			flags: []string{"readonly"},
		}},
		&command{name: "get", minArgs: 3, maxArgs: 3, run: cmdPolicyGet, doc: cmdDoc{
			summary: "Returns a policy in force as JSON, or nil.", group: "rate-limiting", complexity: "O(1)",
			args: []docArg{nameArg}, flags: []string{"readonly"},
		}},
		&command{name: "set", minArgs: 4, maxArgs: 4, run: cmdPolicySet, flags: policyWriteFlags, doc: cmdDoc{
			summary: "Validates a policy (JSON), stores it in the backend and puts it in force on every instance.", group: "rate-limiting", complexity: "O(N)",
			args: []docArg{nameArg, {name: "json", typ: "string"}}, flags: []string{"write", "admin"},
		}},
		&command{name: "del", minArgs: 3, maxArgs: 3, run: cmdPolicyDel, flags: policyWriteFlags, doc: cmdDoc{
			summary: "Removes a runtime policy. Returns 1 if it existed, else 0.", group: "rate-limiting", complexity: "O(N)",
			args: []docArg{nameArg}, flags: []string{"write", "admin"},
		}},
	)}
}

// policyWriteFlags: SET and DEL change what every later decision sees, so
// the decisions queued before them go first; with an admin password they
// need the admin user.
const policyWriteFlags = flagBarrier | flagAdmin

// policies is the server's PolicyAdmin, or the error RL.POLICY answers
// without one.
func (c *connState) policies() (PolicyAdmin, error) {
	if pa := c.srv.cfg.Policies; pa != nil {
		return pa, nil
	}
	return nil, errNoPolicyAdmin
}

func cmdPolicyList(c *connState, _ [][]byte) (any, error) {
	pa, err := c.policies()
	if err != nil {
		return nil, err
	}
	list := pa.List()
	out := make([]any, len(list))
	for i, p := range list {
		out[i] = []any{"name", p.Name, "source", p.Source, "hot", p.Hot}
	}
	return out, nil
}

func cmdPolicyGet(c *connState, args [][]byte) (any, error) {
	pa, err := c.policies()
	if err != nil {
		return nil, err
	}
	if js, ok := pa.Get(string(args[2])); ok {
		return js, nil
	}
	return nil, nil
}

func cmdPolicySet(c *connState, args [][]byte) (any, error) {
	return policyWrite(c, func(ctx context.Context, pa PolicyAdmin) (any, error) {
		if err := pa.Set(ctx, string(args[2]), string(args[3])); err != nil {
			return nil, err
		}
		return replyOK, nil
	})
}

func cmdPolicyDel(c *connState, args [][]byte) (any, error) {
	return policyWrite(c, func(ctx context.Context, pa PolicyAdmin) (any, error) {
		return pa.Del(ctx, string(args[2]))
	})
}

// policyWrite runs SET or DEL under policyTimeout.
func policyWrite(c *connState, write func(context.Context, PolicyAdmin) (any, error)) (any, error) {
	pa, err := c.policies()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(c.srv.ctx, policyTimeout)
	defer cancel()
	return write(ctx, pa)
}
