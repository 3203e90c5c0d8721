#!/usr/bin/env bash
# Stops the local environment started by hack/local-up.sh and removes its state (.local/, or $CODER_K8S_LOCAL_STATE).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${CODER_K8S_LOCAL_STATE:-$root/.local}
for name in operator coder testenv; do
  pidfile="$state/$name.pid"
  [[ -f "$pidfile" ]] || continue
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
done
rm -rf "$state"
echo "stopped the local environment"
