package main

import (
	"fmt"
	"strings"
)

// moved is the one-line answer to a command that left this binary for
// sluice-lab (issue 32: the server links no lab code): `sluice bench`,
// `sluice lab X` and `sluice cluster up|down` say what to run instead,
// and fail. nil for every other command line.
func moved(args []string) error {
	if len(args) == 0 {
		return nil
	}
	sub := func(none string) string { // the word after the command, unless a flag is
		if len(args) > 1 && !strings.HasPrefix(args[1], "-") {
			return args[1]
		}
		return none
	}
	var old, now string
	switch args[0] {
	case "bench":
		old, now = "sluice bench", "sluice-lab bench"
	case "lab":
		if x := sub(""); x != "" {
			old, now = "sluice lab "+x, "sluice-lab "+x
		} else {
			old, now = "sluice lab", "sluice-lab <experiment>"
		}
	case "cluster":
		x := sub("up|down")
		old, now = strings.TrimSuffix("sluice cluster "+x, " up|down"), "sluice-lab cluster "+x
	default:
		return nil
	}
	return fmt.Errorf("'%s' moved: run '%s'", old, now)
}
