package app

import (
	"log/slog"
	"strings"

	"github.com/sluice-rl/sluice/envoycfg"
)

// loadEnvoy loads the --envoy-config directory at start. With no flag it
// returns nil: there are no Envoy rules. A bad directory fails the start,
// the error listing every problem with its file and path.
// The gRPC door (--grpc) takes the Holder as its matcher, and calls its
// LookupRequest once per request (replaces, share_threshold keys).
func loadEnvoy(dir string) (*envoycfg.Holder, error) {
	if dir == "" {
		return nil, nil
	}
	c, err := envoycfg.LoadDir(dir)
	if err != nil {
		return nil, err
	}
	return envoycfg.NewHolder(c), nil
}

// logEnvoyRules prints the rules in force, one line each, as the
// policies are printed at start.
func logEnvoyRules(log *slog.Logger, dir string, h *envoycfg.Holder) {
	if h == nil {
		return
	}
	c := h.Current()
	for _, line := range strings.Split(strings.TrimSpace(c.String()), "\n") {
		if line != "" {
			log.Info("envoy rule", "dir", dir, "rule", line)
		}
	}
	log.Info("envoy config loaded", "dir", dir, "domains", len(c.Domains()), "rules", len(c.Rules()))
}

// reloadEnvoy reloads the Envoy rules on SIGHUP, keeping the last good
// ones on error; reloaded reports the outcome (nil when there is no
// --envoy-config).
func reloadEnvoy(log *slog.Logger, dir string, h *envoycfg.Holder, reloaded func(ok bool)) {
	if h == nil {
		return
	}
	if err := h.Reload(dir); err != nil {
		log.Error("envoy config reload failed; keeping the last good rules", "dir", dir, "err", err)
		reloaded(false)
		return
	}
	c := h.Current()
	for _, r := range c.Rules() {
		log.Info("envoy rule", "dir", dir, "rule", r.String())
	}
	log.Info("envoy config reloaded", "dir", dir, "domains", len(c.Domains()), "rules", len(c.Rules()))
	reloaded(true)
}
