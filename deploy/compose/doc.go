// Package compose runs docker-compose.cluster.yml for real, under podman,
// in the test suite. It has no Go API and nothing imports it: it holds the
// files that let the compose file Docker users run come up on a machine
// with podman and no image registry, and the test that does the
// cross-process lab's experiments on it (docs/compose.md):
//
//   - podman.override.yml: the images (SLUICE_REDIS_IMAGE, SLUICE_IMAGE)
//     and a policy file (SLUICE_CONFIG) for the two sluice services; the
//     compose file itself is unchanged.
//   - containers.conf: podman's settings there (runc, no default ulimits),
//     passed as CONTAINERS_CONF.
//   - Containerfile: a sluice image from a binary built on the host.
//   - sluice.yaml: the policies of the experiments.
//
// It is a package of its own, not a test in cmd/sluice, so that its slow
// part (building two images, six Redis containers and two sluice
// containers) runs beside the other packages under go test ./..., and so
// that skipping it (go test -short, or no podman) skips nothing else.
package compose
