#!/usr/bin/env bash
# Installs, from Debian's packages, what the tests and benchmarks need and
# this machine lacks. Used by .ci/run and `make bench` (root).
set -euo pipefail

need=()
command -v make >/dev/null || need+=(make)
command -v git >/dev/null || need+=(git)
command -v gcc >/dev/null || need+=(gcc)          # go test -race needs cgo
[ -x /usr/sbin/mariadbd ] || need+=(mariadb-server mariadb-client)
[ -x /usr/sbin/haproxy ] || need+=(haproxy)          # the HAProxy sink's tests drive a real one
command -v jq >/dev/null || need+=(jq)                # deploy/hooks scripts parse event JSON
command -v socat >/dev/null || need+=(socat)          # deploy/hooks/haproxy.sh talks to the runtime API
command -v shellcheck >/dev/null || need+=(shellcheck) # lint of deploy/hooks scripts
command -v promtool >/dev/null || need+=(prometheus)  # promtool checks and a real Prometheus scrape
command -v ip >/dev/null || need+=(iproute2)          # e2e: network namespaces
command -v iptables-legacy >/dev/null || need+=(iptables) # e2e: loss and partitions
command -v stress-ng >/dev/null || need+=(stress-ng)  # e2e: CPU saturation
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Two apt runs at once fail on this image; retry once.
  apt-get install -y -qq --no-install-recommends "${need[@]}" || { sleep 5; apt-get install -y -qq --no-install-recommends "${need[@]}"; }
fi
