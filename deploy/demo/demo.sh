#!/usr/bin/env bash
# A local 3-agent shoal cluster on 127.0.0.1 for trying things out.
#   deploy/demo/demo.sh start   # (make demo) start, then print `shoal members`
#   deploy/demo/demo.sh stop    # (make demo-stop) graceful leave of all three
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-bin}/shoal
DIR=.demo

stop() {
  [ -d "$DIR" ] || { echo "no demo running"; return 0; }
  for pidf in "$DIR"/*.pid; do
    [ -e "$pidf" ] || continue
    pid=$(cat "$pidf")
    if kill -0 "$pid" 2>/dev/null; then kill -TERM "$pid"; fi
  done
  # The agents are not this shell's children: their exit status is the
  # last line of their log ("Error: ..." when it was not 0).
  local failed=0
  for pidf in "$DIR"/*.pid; do
    [ -e "$pidf" ] || continue
    pid=$(cat "$pidf")
    log="${pidf%.pid}.log"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "$(basename "${pidf%.pid}") (pid $pid) still running after 10s" >&2
      failed=1
      continue
    fi
    if [ -f "$log" ] && tail -n 1 "$log" | grep -q '^Error:'; then
      echo "$(basename "${pidf%.pid}"): $(tail -n 1 "$log")" >&2
      failed=1
    fi
    rm -f "$pidf"
  done
  if [ "$failed" = 1 ]; then
    echo "demo stopped with errors (logs kept in $DIR/)" >&2
    return 1
  fi
  echo "demo stopped: every agent left cleanly (logs kept in $DIR/)"
}

start() {
  [ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }
  stop >/dev/null || true
  mkdir -p "$DIR"
  [ -s "$DIR/key" ] || "$BIN" keygen | tail -n1 > "$DIR/key"
  chmod 600 "$DIR/key"
  for i in 1 2 3; do
    # The key through the environment, not argv: ps shows argv to every user.
    SHOAL_ENCRYPT="$(cat "$DIR/key")" "$BIN" agent --node "demo$i" \
      --bind "127.0.0.1:$((7945 + i))" --http-addr "127.0.0.1:$((8945 + i))" --rpc-addr "127.0.0.1:$((7372 + i))" \
      --keyring-file "$DIR/keyring$i.json" \
      --profile fast --join 127.0.0.1:7946 --snapshot "$DIR/snapshot$i" --tags-file "$DIR/tags$i.json" \
      --api-token-file "$DIR/api-token" \
      --tag demo=yes >"$DIR/agent$i.log" 2>&1 &
    echo $! > "$DIR/agent$i.pid"
  done
  for _ in $(seq 1 100); do
    n=$("$BIN" members --http-addr 127.0.0.1:8946 --status alive 2>/dev/null | tail -n +2 | wc -l || true)
    [ "$n" = 3 ] && break
    sleep 0.1
  done
  "$BIN" members --http-addr 127.0.0.1:8946
  cat <<MSG

Three agents are running (logs in $DIR/agentN.log, HTTP API on 127.0.0.1:8946-8948,
Serf RPC on 127.0.0.1:7373-7375). Writes, keys and logs need the API token in
$DIR/api-token (shared by the three; the CLI finds it as the same user). Try:
  $BIN members                         # agent 1 is the default --http-addr
  $BIN info --http-addr 127.0.0.1:8947
  $BIN tags --set owner=me --http-addr 127.0.0.1:8947
  kill -9 \$(cat $DIR/agent3.pid); sleep 1; $BIN members
  make demo-stop
MSG
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
