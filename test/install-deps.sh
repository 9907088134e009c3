#!/usr/bin/env bash
# Installs, from Debian's packages with apt-get (root), what the tests and
# benchmarks need and this machine lacks.
#
#   install-deps.sh [--check] [demo|test|all]
#
# demo: what `make demo` needs (MariaDB server and client, HAProxy).
# test: what `make test` needs (real MariaDB, HAProxy, promtool, shellcheck,
#       jq, socat, chromium, gcc for -race, ...); `make test` calls this.
# all:  that plus the fault suite and benchmarks (network namespaces,
#       iptables, stress-ng, galera-4, rsync and percona-toolkit); the default,
#       used by .ci/run and `make bench`.
# --check: install nothing; list what is missing and exit 1 if anything is.
#
# Packages it installs get no running or boot-enabled service: apt is kept from
# starting them (policy-rc.d) and their systemd units are disabled afterwards.
set -euo pipefail

check=false
set_name=all
for arg in "$@"; do
  case $arg in
    --check) check=true ;;
    demo | test | all) set_name=$arg ;;
    *) echo "install-deps.sh: unknown argument $arg (usage: install-deps.sh [--check] [demo|test|all])" >&2; exit 2 ;;
  esac
done

need=()
# Each line: what is missing, then the Debian package that provides it.
missing() { need+=("$1"); }
{ [ -x /usr/sbin/mariadbd ] && command -v mariadb-install-db >/dev/null; } ||
  missing mariadb-server                                     # real-server probe and pool tests
command -v mariadb >/dev/null || missing mariadb-client
[ -x /usr/sbin/haproxy ] || command -v haproxy >/dev/null || missing haproxy # the HAProxy sink's tests drive a real one
if [ "$set_name" != demo ]; then
command -v make >/dev/null || missing make
command -v git >/dev/null || missing git
command -v gcc >/dev/null || missing gcc                     # go test -race needs cgo
command -v jq >/dev/null || missing jq                       # deploy/hooks scripts parse event JSON
command -v socat >/dev/null || missing socat                 # deploy/hooks/haproxy.sh talks to the runtime API
command -v shellcheck >/dev/null || missing shellcheck       # lint of deploy/hooks scripts
command -v promtool >/dev/null || missing prometheus         # promtool checks and a real Prometheus scrape
command -v setpriv >/dev/null || missing util-linux          # the unprivileged-user test (as root)
command -v chromium >/dev/null || missing chromium           # test/ui: the status page in a real browser
fi
if [ "$set_name" = all ]; then
  command -v ip >/dev/null || missing iproute2               # e2e: network namespaces
  command -v iptables-legacy >/dev/null || missing iptables  # e2e: loss and partitions
  command -v stress-ng >/dev/null || missing stress-ng       # e2e: CPU saturation
  [ -e /usr/lib/galera/libgalera_smm.so ] || missing galera-4 # e2e: the real Galera cluster
  command -v rsync >/dev/null || missing rsync               # e2e: Galera's rsync SST
  command -v pt-heartbeat >/dev/null || missing percona-toolkit # bench: the freshness suite's pt-heartbeat
fi

[ ${#need[@]} -eq 0 ] && exit 0
if $check; then
  what="make $set_name"
  [ "$set_name" = all ] && what="make test, make e2e and make bench"
  echo "missing for $what: ${need[*]}" >&2
  echo "install them as root: apt-get install -y --no-install-recommends ${need[*]}" >&2
  echo "(or run the test command as root on Debian/Ubuntu: it installs them with apt-get)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq

# The tests run their own servers (MariaDB, HAProxy, Prometheus) on their own
# ports; the packages' system services are not wanted. A policy-rc.d that
# refuses every action keeps apt from starting them (a policy-rc.d already
# there is left as it is; units it let start are stopped below).
# INSTALL_DEPS_POLICY_RC_D moves it, for the script's own test.
policy=${INSTALL_DEPS_POLICY_RC_D:-/usr/sbin/policy-rc.d}
own_policy=false
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# test/install-deps.sh: no service starts while it installs packages.\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  own_policy=true
fi
trap '$own_policy && rm -f "$policy"' EXIT

# Two apt runs at once fail on this image; retry once.
apt-get install -y -qq --no-install-recommends "${need[@]}" || { sleep 5; apt-get install -y -qq --no-install-recommends "${need[@]}"; }

# apt enables the units of new packages at boot: disable those of the packages
# installed here (never units of packages that were already installed).
if command -v systemctl >/dev/null; then
  for pkg in "${need[@]}"; do
    # Most packages have no unit: grep finding none is not a failure.
    units=$(dpkg -L "$pkg" 2>/dev/null | grep -E '^/(usr/)?lib/systemd/system/[^/]+\.(service|socket|timer)$' || true)
    [ -n "$units" ] || continue
    while read -r unit; do
        unit=${unit##*/}
        case $unit in *@.*) continue ;; esac # templates have no boot link
        if systemctl is-enabled --quiet "$unit" 2>/dev/null; then
          if systemctl disable --quiet "$unit" 2>/dev/null; then echo "install-deps.sh: $unit (from $pkg) not enabled at boot"; fi
        fi
        if systemctl is-active --quiet "$unit" 2>/dev/null; then
          systemctl stop "$unit" 2>/dev/null || true # started despite the policy (an existing policy-rc.d allowed it)
        fi
      done <<<"$units"
  done
fi
