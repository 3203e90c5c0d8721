#!/usr/bin/env bash
# Part of hack/local-up.sh --real-coder: runs the real open-source Coder server (v2.30.0, built from Go modules by
# hack/build-testenv.sh) on 127.0.0.1:$coder_port in place of the Coder API test server, with its own database on the
# local PostgreSQL, and creates the owner. Nothing is downloaded at run time: Coder's Terraform provisioner runs the
# terraform and Coder's own Terraform provider that hack/build-testenv.sh builds from Go modules (the aggregated
# samples import through them), beside the echo provisioner.
# Sourced, not run: it uses $root, $state, $coder_port, $coder_url and step() from local-up.sh, sets
# CODER_DATABASE_URL and defines create_template_tester and apply_aggregated_samples for this Coder.

coder_bin_dir=$(hack/build-testenv.sh coder | sed -n 's/^coder=//p')
[[ -x "$coder_bin_dir/coder" ]] || { echo "error: the Coder server was not built (hack/build-testenv.sh coder)" >&2; exit 1; }

# Coder migrates its own, empty database; the control plane's spec.database points at the same one, so the
# operator-access bootstrap writes into Coder's real schema.
base_url=$(cat "$state/testenv/postgres-url")
CODER_DATABASE_URL=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/coder_real")))' "$base_url")
psql "$base_url" -qc 'CREATE DATABASE coder_real' >/dev/null 2>&1 || true

# Coder v2.30.0 runs the terraform it finds on PATH (1.1.0 to 1.14.x; it would download one otherwise). The pinned
# terraform v1.5.7 and Coder's Terraform provider v2.13.1 (the version Coder v2.30.0 depends on) come from
# hack/build-testenv.sh; the provider is linked into a filesystem mirror that terraform init reads through the CLI
# configuration, so no registry is ever asked.
prepare_terraform() {
  local terraform_bin provider_bin version=2.13.1
  terraform_bin=$(hack/build-testenv.sh terraform | sed -n 's/^terraform=//p')
  provider_bin=$(hack/build-testenv.sh terraform-provider-coder | sed -n 's/^terraform-provider-coder=//p')
  [[ -x "$terraform_bin/terraform" && -x "$provider_bin/terraform-provider-coder_v$version" ]] || return 1
  local mirror="$state/coder/terraform-mirror"
  local dir="$mirror/registry.terraform.io/coder/coder/$version/linux_amd64"
  mkdir -p "$dir"
  ln -sf "$provider_bin/terraform-provider-coder_v$version" "$dir/terraform-provider-coder_v$version"
  cat >"$state/coder/terraform.rc" <<RC
provider_installation {
  filesystem_mirror {
    path    = "$mirror"
    include = ["registry.terraform.io/coder/*"]
  }
}
RC
  export PATH="$terraform_bin:$PATH"
}

mkdir -p "$state/coder/home" "$state/coder/config" "$state/coder/cache"
provisioners=echo
if prepare_terraform; then
  provisioners=echo,terraform
  export TF_CLI_CONFIG_FILE="$state/coder/terraform.rc"
else
  echo "note: terraform could not be built (hack/build-testenv.sh terraform terraform-provider-coder); Coder runs the echo provisioner only and the aggregated samples cannot import" >&2
fi
echo "$provisioners" >"$state/coder/provisioners"

step "start the real Coder server v2.30.0 on $coder_url (provisioners: $provisioners; offline)"
HOME="$state/coder/home" CODER_PROVISIONER_TYPES=$provisioners CODER_PG_CONNECTION_URL="$CODER_DATABASE_URL" \
  nohup "$coder_bin_dir/coder" server --global-config "$state/coder/config" --cache-dir "$state/coder/cache" \
  --http-address "127.0.0.1:$coder_port" --access-url "$coder_url" --telemetry=false --update-check=false \
  --derp-server-stun-addresses disable --block-direct-connections --provisioner-daemons 2 \
  >"$state/logs/coder.log" 2>&1 &
echo $! >"$state/coder.pid"
for _ in $(seq 1 90); do
  curl -fsS "$coder_url/api/v2/buildinfo" >/dev/null 2>&1 && break
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
  curl "${args[@]}" "$coder_url$path"
}
json_field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

step "create Coder's owner (the session token goes to $state/coder/owner-token, readable by you only)"
password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
(umask 077 && printf '%s' "$password" >"$state/coder/owner-password")
coder_api POST /api/v2/users/first \
  "{\"email\":\"admin@coder.local\",\"username\":\"admin\",\"name\":\"Admin\",\"password\":\"$password\"}" >/dev/null
(umask 077 && coder_api POST /api/v2/users/login "{\"email\":\"admin@coder.local\",\"password\":\"$password\"}" |
  json_field session_token | tr -d '\n' >"$state/coder/owner-token")

# The owner of template-test workspaces, created by Coder's own user route as an active plain member of the
# organization coder (login type none: nobody logs in as it). Prints the user's ID.
create_template_tester() {
  local org
  org=$(coder_api GET /api/v2/organizations/coder | json_field id)
  coder_api POST /api/v2/users "{\"email\":\"template-tester@coder.local\",\"username\":\"template-tester\",\"name\":\"Template Tester\",\"login_type\":\"none\",\"user_status\":\"active\",\"organization_ids\":[\"$org\"]}" |
    json_field id
}

# Without the Terraform provisioner, a template from spec.files would wait for a provisioner that never comes.
apply_aggregated_samples() {
  if [[ $provisioners == *terraform* ]]; then
    kubectl apply -f config/samples/aggregation/aggregation_v1alpha1_codertemplate.yaml
    kubectl apply -f config/samples/aggregation/aggregation_v1alpha1_coderworkspace.yaml
  else
    echo "skipped: Coder runs without the Terraform provisioner here" >&2
    table_args+=(--aggregated-skipped)
  fi
}
