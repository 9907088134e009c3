#!/bin/sh
# Regenerates the show-servers-state fixtures from the real HAProxy binary.
# Run from this directory: sh capture.sh
set -eu
d=/tmp/shoal-hx-capture
mkdir -p $d
haproxy -v | head -1 > haproxy-version.txt
haproxy -f capture.cfg -db >$d/log 2>&1 &
pid=$!
trap 'kill $pid' EXIT
while [ ! -S $d/admin.sock ]; do sleep 0.1; done
cli() { python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall((sys.argv[2] + "\n").encode())
out = b""
while True:
    b = s.recv(65536)
    if not b: break
    out += b
sys.stdout.write(out.decode())' $d/admin.sock "$1"; }
cli 'show servers state' > state-initial.txt
cli 'show servers state nosuch' > state-no-backend.txt
cli 'set server db_rw/db1 state maint' >/dev/null
cli 'set server db_rw/db2 state drain' >/dev/null
cli 'set server db_ro/db2 state ready' >/dev/null
cli 'set server db_ro/db1 weight 10' >/dev/null
cli 'show servers state' > state-changed.txt
