package local

import "github.com/sluice-rl/sluice/limit"

// WindowState is one window key. The zero value is an absent key.
type WindowState struct {
	A, B, C int64
}

// TakeSlidingWindow decides op for cost on st at now, as sliding_window.lua does.
func TakeSlidingWindow(st *WindowState, w limit.Window, cost, now int64, op limit.Op) (limit.Result, bool) {
	panic("TODO: TakeSlidingWindow")
}

// TakeFixedWindow decides op for cost on st at now, as fixed_window.lua does.
func TakeFixedWindow(st *WindowState, w limit.Window, cost, now int64, op limit.Op) (limit.Result, bool) {
	panic("TODO: TakeFixedWindow")
}
