#!/usr/bin/env bash
# Run a shared cache tier on this machine to try it out: cache/redis.conf on 127.0.0.1, a user
# 'jitflow' with a fresh password, and a fresh signing key. Runs in the foreground; Ctrl-C stops it.
#
#   cache/start.sh [port]          (default 6379)
#
# It prints the two lines to paste into the shells (or job scripts) that run jitflow.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
port="${1:-6379}"
if ! command -v redis-server >/dev/null; then
    echo "redis-server is not installed (Debian/Ubuntu: apt-get install redis-server; macOS: brew install redis)" >&2
    exit 1
fi
random_hex() { od -An -vtx1 -N"$1" /dev/urandom | tr -d ' \n'; }
password="$(random_hex 16)"
signing_key="$(random_hex 32)"
echo "export JITFLOW_REMOTE_CACHE=redis://jitflow:${password}@127.0.0.1:${port}/0"
echo "export JITFLOW_REMOTE_CACHE_KEY=${signing_key}"
echo "# (a trial tier: loopback only, 512 MB, forgotten when it stops)"
exec redis-server "$here/redis.conf" --port "$port" --bind 127.0.0.1 --maxmemory 512mb --dir "${TMPDIR:-/tmp}" \
    --user default off \
    --user jitflow on ">${password}" '~jitflow:*' resetchannels -@all +@read +@write +@scripting +ping -@dangerous
