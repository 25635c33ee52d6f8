// Package region enforces global budgets per region: a sluice instance
// decides the requests of a `scope: global` policy from its region's pool
// of tokens in the regional store, never crossing to the home store on a
// request's path, and a background allocator keeps the pool filled by
// claiming batches of tokens from the global bucket in the home store,
// sized by the demand it measures and, when regions together ask for more
// than the budget, by each instance's share of the demand on the key's
// board at home. A region that cannot reach home decides with what it
// holds, then with its floor (region_floor of the global limit and rate);
// what the floor admitted is debited from the global bucket when home
// answers again. The hot-key leases of package hotkey are the same idea
// one level down, with the same claim and return operations.
//
// The bound: tokens admitted across regions over any time T are at most
// the global bucket's own bound (limit + rate·T) plus what floors admitted
// and have not been debited yet; what the pools hold at the end of T is
// admitted later or expires, never twice.
package region
