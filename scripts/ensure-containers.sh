#!/usr/bin/env bash
# Installs what deploy/compose's test (TestComposeUnderPodman) drives for
# real when it is missing: podman and podman-compose, which run
# docker-compose.cluster.yml; runc, the runtime deploy/compose/containers.conf
# names (crun fails on cgroups in the sandboxes CI runs in); mmdebstrap,
# which builds the Redis image, since no image registry is reachable. The
# test fails, never skips, in CI without them.
set -euo pipefail
need=()
for tool in podman podman-compose runc mmdebstrap; do
  command -v "$tool" >/dev/null || need+=("$tool")
done
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -q "${need[@]}" >/dev/null 2>&1 ||
  { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q "${need[@]}" >/dev/null; }
podman --version
