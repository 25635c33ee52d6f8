#!/usr/bin/env bash
# Installs what the tests drive for real when it is missing: redis-server,
# redis-cli, redis-benchmark and redis-sentinel (the cluster tests run against real Redis and
# fail, never skip, in CI without them), redis-py for the client test and
# iproute2 for the network-partition test (which also needs root).
set -euo pipefail
need=()
command -v redis-server >/dev/null && command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null ||
  need+=(redis-server redis-tools)
command -v redis-sentinel >/dev/null || need+=(redis-sentinel) # the Sentinel failover test
/usr/bin/python3 -c 'import redis' 2>/dev/null || need+=(python3-redis)
command -v ip >/dev/null || need+=(iproute2) # the network-partition test's namespaces and veths
[ ${#need[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -q "${need[@]}" >/dev/null 2>&1 ||
  { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q "${need[@]}" >/dev/null; }
redis-server --version
