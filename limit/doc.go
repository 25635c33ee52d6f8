// Package limit holds the types shared by every layer of sluice: a Policy,
// a Request, a Result, the Store seam and the error values.
//
// It must not import any other sluice package, and it must not hold state.
package limit
