package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// writeOut writes text to path, making missing folders; "" writes nothing.
func writeOut(path, text string) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

// positive fails, naming each, when a number flag of fs is not positive.
func positive(fs *flag.FlagSet) error {
	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		var bad bool
		switch v := g.Get().(type) {
		case int:
			bad = v <= 0
		case int64:
			bad = v <= 0
		case float64:
			bad = v <= 0
		case time.Duration:
			bad = v <= 0
		}
		if bad {
			errs = append(errs, fmt.Errorf("--%s %s: want a positive value", f.Name, f.Value))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	return nil
}
