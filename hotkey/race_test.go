//go:build race

package hotkey

const raceEnabled = true
