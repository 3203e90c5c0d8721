#!/usr/bin/env bash
# Part of hack/local-up.sh --real-coder: runs the real open-source Coder server (v2.30.0, built from Go modules by
# hack/build-testenv.sh) on 127.0.0.1:80 in place of the Coder API test server, with its own database on the local
# PostgreSQL, creates the owner, and puts a sample template and workspace in it (echo provisioner: nothing is
# downloaded). Sourced, not run: it uses $root, $state and step() from local-up.sh and sets CODER_DATABASE_URL.

coder_bin_dir=$(hack/build-testenv.sh coder | sed -n 's/^coder=//p')
[[ -x "$coder_bin_dir/coder" ]] || { echo "error: the Coder server was not built (hack/build-testenv.sh coder)" >&2; exit 1; }

# Coder migrates its own, empty database; the control plane's spec.database points at the same one, so the
# operator-access bootstrap writes into Coder's real schema.
base_url=$(cat "$state/testenv/postgres-url")
CODER_DATABASE_URL=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/coder_real")))' "$base_url")
psql "$base_url" -qc 'CREATE DATABASE coder_real' >/dev/null 2>&1 || true

step "start the real Coder server v2.30.0 on 127.0.0.1:80 (echo provisioner, offline)"
mkdir -p "$state/coder/home" "$state/coder/config" "$state/coder/cache"
HOME="$state/coder/home" CODER_PROVISIONER_TYPES=echo CODER_PG_CONNECTION_URL="$CODER_DATABASE_URL" \
  nohup "$coder_bin_dir/coder" server --global-config "$state/coder/config" --cache-dir "$state/coder/cache" \
  --http-address 127.0.0.1:80 --access-url http://127.0.0.1:80 --telemetry=false --update-check=false \
  --derp-server-stun-addresses disable --block-direct-connections --provisioner-daemons 2 \
  >"$state/logs/coder.log" 2>&1 &
echo $! >"$state/coder.pid"
for _ in $(seq 1 90); do
  curl -fsS http://127.0.0.1:80/api/v2/buildinfo >/dev/null 2>&1 && break
  kill -0 "$(cat "$state/coder.pid")" 2>/dev/null || {
    echo "error: the Coder server stopped; see $state/logs/coder.log (binding 127.0.0.1:80 needs root or CAP_NET_BIND_SERVICE)" >&2
    tail -5 "$state/logs/coder.log" >&2
    exit 1
  }
  sleep 1
done

# A JSON call to Coder with the owner token (when there is one); prints the answer, fails on an HTTP error.
coder_api() {
  local method=$1 path=$2 body=${3:-}
  local args=(-fsS -X "$method" -H 'Content-Type: application/json')
  [[ -s "$state/coder/owner-token" ]] && args+=(-H "Coder-Session-Token: $(cat "$state/coder/owner-token")")
  [[ -n "$body" ]] && args+=(--data "$body")
  curl "${args[@]}" "http://127.0.0.1:80$path"
}
json_field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

step "create Coder's owner (the session token goes to $state/coder/owner-token, readable by you only)"
password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
(umask 077 && printf '%s' "$password" >"$state/coder/owner-password")
coder_api POST /api/v2/users/first \
  "{\"email\":\"admin@coder.local\",\"username\":\"admin\",\"name\":\"Admin\",\"password\":\"$password\"}" >/dev/null
(umask 077 && coder_api POST /api/v2/users/login "{\"email\":\"admin@coder.local\",\"password\":\"$password\"}" |
  json_field session_token | tr -d '\n' >"$state/coder/owner-token")

step "add a sample template and workspace to Coder (echo provisioner)"
org=$(coder_api GET /api/v2/organizations/default | json_field id)
"$coder_bin_dir/echotar" success "$state/coder/sample-template.tar"
file=$(curl -fsS -X POST -H 'Content-Type: application/x-tar' -H "Coder-Session-Token: $(cat "$state/coder/owner-token")" \
  --data-binary "@$state/coder/sample-template.tar" http://127.0.0.1:80/api/v2/files | json_field hash)
version=$(coder_api POST "/api/v2/organizations/$org/templateversions" \
  "{\"storage_method\":\"file\",\"file_id\":\"$file\",\"provisioner\":\"echo\"}" | json_field id)
for _ in $(seq 1 60); do
  status=$(coder_api GET "/api/v2/templateversions/$version" | python3 -c 'import json, sys; print(json.load(sys.stdin)["job"]["status"])')
  [[ $status == succeeded ]] && break
  [[ $status == failed || $status == canceled ]] && { echo "error: the sample template import $status" >&2; exit 1; }
  sleep 1
done
template=$(coder_api POST "/api/v2/organizations/$org/templates" \
  "{\"name\":\"sample\",\"display_name\":\"Sample\",\"template_version_id\":\"$version\"}" | json_field id)
coder_api POST "/api/v2/organizations/$org/members/me/workspaces" \
  "{\"name\":\"sample\",\"template_id\":\"$template\"}" >/dev/null
