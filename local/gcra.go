package local

import "github.com/sluice-rl/sluice/limit"

// GCRAState is one GCRA key. The zero value is an absent key.
type GCRAState struct {
	A, B, C int64
}

// TakeGCRA decides op for cost on st at now, as gcra.lua does.
func TakeGCRA(st *GCRAState, b limit.Bucket, cost, now int64, op limit.Op) (limit.Result, bool) {
	panic("TODO: TakeGCRA")
}
