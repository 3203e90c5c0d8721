#!/usr/bin/env bash
# The local environment: a real Kubernetes control plane on this machine (etcd, kube-apiserver, controller manager,
# scheduler and kwok fake nodes, all built from Go modules), the CRDs and RBAC, the operator running out of cluster,
# and the samples with the prerequisites they document. It ends with one table: every sample object, its state and
# what it did in Coder. Stop it with hack/local-down.sh. State and logs live in .local/.
#   hack/local-up.sh                the Coder API test server stands in for Coder (every sample reaches Ready)
#   hack/local-up.sh --real-coder   the real open-source Coder server v2.30.0 instead; the samples it cannot serve
#                                   (licensed features, routes newer than v2.30.0) say why in the table
# Settings for running several environments or tests (defaults in brackets):
#   CODER_K8S_LOCAL_STATE        state directory [.local]
#   CODER_K8S_LOCAL_BIN          directory with coder-k8s, coder-k8s-testenv and coder-k8s-coder-testserver already
#                                built (skips cargo build)
#   CODER_K8S_LOCAL_CODER_PORT   port of Coder on 127.0.0.1 [80]; another port goes to the control plane's
#                                spec.service.port
#   CODER_K8S_LOCAL_API_PORT     port of the aggregated API server [6443]
#   CODER_K8S_LOCAL_HEALTH_PORT  port of the operator's health endpoints [18081]
#   CODER_K8S_LOCAL_WAIT         seconds to wait for the samples [300]
set -euo pipefail
real_coder=false
for arg in "$@"; do
  case $arg in
    --real-coder) real_coder=true ;;
    *) echo "usage: hack/local-up.sh [--real-coder]" >&2; exit 2 ;;
  esac
done
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
source hack/lib.sh

require_tool go "install Go 1.26 (https://go.dev/dl); it builds the local control plane"
require_tool kubectl "install kubectl v1.32 or newer"
require_tool python3 "install Python 3 (it reads JSON answers and prints the closing table)"
require_tool psql "install the PostgreSQL client (Debian package postgresql-client)"

state=${CODER_K8S_LOCAL_STATE:-$root/.local}
coder_port=${CODER_K8S_LOCAL_CODER_PORT:-80}
api_port=${CODER_K8S_LOCAL_API_PORT:-6443}
health_port=${CODER_K8S_LOCAL_HEALTH_PORT:-18081}
wait_seconds=${CODER_K8S_LOCAL_WAIT:-300}
coder_url="http://127.0.0.1:$coder_port"
mkdir -p "$state/logs"
if [[ -f "$state/testenv.pid" ]] && kill -0 "$(cat "$state/testenv.pid")" 2>/dev/null; then
  echo "the local environment is already running; stop it first with hack/local-down.sh" >&2
  exit 1
fi

step "build the control plane binaries from Go modules (cached in ~/.cache/coder-k8s)"
hack/build-testenv.sh etcd k8s kwok >/dev/null

if [[ -n ${CODER_K8S_LOCAL_BIN:-} ]]; then
  bin=$CODER_K8S_LOCAL_BIN
  for b in coder-k8s coder-k8s-testenv coder-k8s-coder-testserver; do
    [[ -x "$bin/$b" ]] || { echo "error: $bin/$b is missing (CODER_K8S_LOCAL_BIN); cargo build -p coder-k8s -p coder-k8s-testenv -p coder-k8s-coder-testserver" >&2; exit 1; }
  done
else
  require_tool cargo "install Rust with rustup (https://rustup.rs)"
  step "build coder-k8s, the local control plane runner and the Coder API test server"
  cargo build --quiet -p coder-k8s -p coder-k8s-testenv -p coder-k8s-coder-testserver
  bin="${CARGO_TARGET_DIR:-$root/target}/debug"
fi

step "start etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok and PostgreSQL (Coder's tables)"
rm -f "$state/testenv/kubeconfig"
nohup "$bin"/coder-k8s-testenv up --dir "$state/testenv" --with-kwok --with-postgres >"$state/logs/testenv.log" 2>&1 &
echo $! >"$state/testenv.pid"
export KUBECONFIG="$state/testenv/kubeconfig"
for _ in $(seq 1 120); do
  [[ -s "$KUBECONFIG" && -s "$state/testenv/postgres-url" ]] && kubectl get --raw /readyz >/dev/null 2>&1 && break
  kill -0 "$(cat "$state/testenv.pid")" 2>/dev/null || { echo "the control plane failed to start; see $state/logs/testenv.log" >&2; tail -20 "$state/logs/testenv.log" >&2; exit 1; }
  sleep 1
done
kubectl get --raw /readyz >/dev/null || { echo "the control plane is not ready; see $state/logs/testenv.log" >&2; exit 1; }

step "install the CRDs and RBAC"
kubectl create namespace coder-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f config/crd/bases/ -f config/rbac/ >/dev/null
kubectl wait --for=condition=Established crd --all --timeout=60s >/dev/null

# Coder's image cannot run here (no container runtime, kwok pods are fake). Either the Coder API test server or the
# real Coder server runs on 127.0.0.1:$coder_port, the port of the sample control plane's Service, and the operator
# resolves Service hosts to 127.0.0.1.
CODER_DATABASE_URL=$(cat "$state/testenv/postgres-url")

# The owner of template-test workspaces must be an active plain member of the organization. The test server reads
# Coder's users from PostgreSQL and has no user-creating route, so the row is written the way Coder writes it (a
# password user with no site role, a member of the default organization). Prints the user's ID.
create_template_tester() {
  psql "$CODER_DATABASE_URL" -qtAX -v ON_ERROR_STOP=1 <<'SQL'
INSERT INTO users (id, email, username, name, hashed_password, created_at, updated_at, rbac_roles, login_type, status)
VALUES (gen_random_uuid(), 'template-tester@coder.local', 'template-tester', 'Template Tester', ''::bytea, now(), now(),
        '{}', 'password', 'active')
ON CONFLICT DO NOTHING;
INSERT INTO organization_members (organization_id, user_id, created_at, updated_at, roles)
SELECT o.id, u.id, now(), now(), '{}' FROM organizations o, users u
WHERE o.is_default AND u.username = 'template-tester'
ON CONFLICT DO NOTHING;
SELECT id FROM users WHERE username = 'template-tester' AND NOT deleted;
SQL
}

apply_aggregated_samples() {
  kubectl apply -f config/samples/aggregation/aggregation_v1alpha1_codertemplate.yaml
  kubectl apply -f config/samples/aggregation/aggregation_v1alpha1_coderworkspace.yaml
}

if $real_coder; then
  source hack/local-real-coder.sh
else
  # The entitlements of the licensed samples and examples: provisioner keys, workspace proxies, the AI Gateway
  # (aibridge), more organizations and groups (examples/coder-people).
  step "start the Coder API test server in place of Coder ($coder_url; entitled: external provisioners, workspace proxies, AI Gateway, organizations, groups)"
  nohup "$bin"/coder-k8s-coder-testserver --database-url "$CODER_DATABASE_URL" --listen "127.0.0.1:$coder_port" \
    --entitle external_provisioner_daemons workspace_proxy aibridge multiple_organizations template_rbac >"$state/logs/coder.log" 2>&1 &
  echo $! >"$state/coder.pid"
  for _ in $(seq 1 30); do
    curl -fsS "$coder_url/api/v2/buildinfo" >/dev/null 2>&1 && break
    kill -0 "$(cat "$state/coder.pid")" 2>/dev/null || break
    sleep 0.5
  done
  if ! curl -fsS "$coder_url/api/v2/buildinfo" >/dev/null 2>&1; then
    echo "error: the Coder API test server did not start; see $state/logs/coder.log" >&2
    echo "       Binding 127.0.0.1:80 needs root or CAP_NET_BIND_SERVICE (or set CODER_K8S_LOCAL_CODER_PORT):" >&2
    echo "       sudo setcap cap_net_bind_service=+ep $bin/coder-k8s-coder-testserver" >&2
    tail -5 "$state/logs/coder.log" >&2
    exit 1
  fi
fi

step "run the operator out of cluster (--app=all: the controllers and the aggregated API server on 127.0.0.1:$api_port)"
POD_NAMESPACE=coder-system nohup "$bin"/coder-k8s --app=all --service-address-override=127.0.0.1 \
  --health-probe-bind-address="127.0.0.1:$health_port" --apiserver-bind-address="127.0.0.1:$api_port" \
  >"$state/logs/operator.log" 2>&1 &
echo $! >"$state/operator.pid"

# kube-apiserver reaches the out-of-cluster server through an ExternalName Service (there is no kube-proxy here);
# with that Service type it dials the APIService's port directly. The server fills the APIService caBundle itself.
step "register the aggregated API (APIService v1alpha1.aggregation.coder.com)"
kubectl apply -f hack/local/apiserver-service.yaml -f deploy/apiserver-apiservice.yaml >/dev/null
kubectl patch apiservice v1alpha1.aggregation.coder.com --type=merge -p "{\"spec\":{\"service\":{\"port\":$api_port}}}" >/dev/null
for _ in $(seq 1 60); do
  kubectl get --raw /apis/aggregation.coder.com/v1alpha1 >/dev/null 2>&1 && break
  kill -0 "$(cat "$state/operator.pid")" 2>/dev/null || { echo "the operator stopped; see $state/logs/operator.log" >&2; tail -20 "$state/logs/operator.log" >&2; exit 1; }
  sleep 1
done
kubectl get --raw /apis/aggregation.coder.com/v1alpha1 >/dev/null || { echo "the aggregated API does not answer; see $state/logs/operator.log" >&2; exit 1; }

step "create the owner of template-test workspaces: the plain member template-tester"
tester_id=$(create_template_tester)
echo "template-tester has the ID $tester_id" >&2

step "create what the samples refer to: the database Secret and the workspace proxy's token Secret (with consent)"
kubectl create namespace coder --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n coder create secret generic coder-db-app --from-literal=uri="$CODER_DATABASE_URL" \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
# A direct-mode proxy sends this token to its primary access URL; the label and annotation are the Secret's consent.
kubectl -n coder create secret generic coderworkspaceproxy-token \
  --from-literal=token="$(python3 -c 'import secrets; print(secrets.token_hex(16))')" --dry-run=client -o yaml |
  kubectl label --local -f - coder.com/credential=true -o yaml |
  kubectl annotate --local -f - coder.com/credential-destinations=https://coder.example.com -o yaml |
  kubectl apply -f - >/dev/null

step "apply the samples, with the control plane's database and opt-ins"
kubectl apply -f config/samples/
# One patch: the database of the operator-access bootstrap, the template-test owner, and the opt-ins of the AI
# Gateway key and MCP server samples (service.port only when Coder is not on port 80).
python3 - "$tester_id" "$coder_port" >"$state/control-plane-patch.json" <<'PY'
import json, sys
spec = {
    "database": {"connectionSecretRef": {"name": "coder-db-app", "key": "uri"}},
    "templateTests": {"ownerUserID": sys.argv[1]},
    "aiGateway": {"allowKeys": True},
    "mcpServers": {"organizations": ["coder"]},
}
if sys.argv[2] != "80":
    spec["service"] = {"port": int(sys.argv[2])}
print(json.dumps({"spec": spec}))
PY
kubectl -n coder patch codercontrolplane codercontrolplane-sample --type=merge --patch-file "$state/control-plane-patch.json" >/dev/null

step "wait for the control plane's operator access"
kubectl -n coder wait codercontrolplane/codercontrolplane-sample --for=jsonpath='{.status.operatorAccessReady}'=true --timeout=120s >/dev/null || true

table_args=()
$real_coder && table_args+=(--real-coder)
step "apply the sample CoderTemplate and CoderWorkspace through the aggregated API (as a user applies them from Git)"
apply_aggregated_samples

sample_kinds=codercontrolplanes,coderprovisioners,coderworkspaceproxies,codertemplatetests,coderaiproviders,coderaigatewaykeys,codermcpservers
read_samples() {
  kubectl -n coder get "$sample_kinds" -o json >"$state/samples.json" 2>/dev/null || echo '{}' >"$state/samples.json"
  kubectl -n coder get coderworkspaces,codertemplates -o json >"$state/aggregated.json" 2>/dev/null || echo '{}' >"$state/aggregated.json"
}
step "wait for every sample to settle (at most ${wait_seconds} s)"
deadline=$((SECONDS + wait_seconds))
while :; do
  read_samples
  python3 hack/local/status-table.py --wait-check "${table_args[@]}" "$state/samples.json" "$state/aggregated.json" && break
  ((SECONDS < deadline)) || { echo "some samples did not settle within ${wait_seconds} s" >&2; break; }
  sleep 3
done

cat <<MSG

The local environment is running.
  export KUBECONFIG=$KUBECONFIG
  kubectl get nodes; kubectl get all -n coder
  kubectl -n coder get $sample_kinds
  kubectl get coderworkspaces,codertemplates -A
Coder's image does not run here (kwok pods are fake): $(if $real_coder; then echo "the real Coder server v2.30.0 answers on $coder_url (owner admin@coder.local; password in $state/coder/owner-password, session token in $state/coder/owner-token)"; else echo "the Coder API test server answers on $coder_url in its place"; fi).
PostgreSQL (Coder's tables): $CODER_DATABASE_URL
Logs: $state/logs/ (operator.log, coder.log, testenv.log) and $state/testenv/logs/.
Stop it: hack/local-down.sh

MSG
set +e
python3 hack/local/status-table.py "${table_args[@]}" "$state/samples.json" "$state/aggregated.json"
settled=$?
set -e
if ((settled != 0)) && ! $real_coder; then
  echo "error: not every sample is ready; see the table above and $state/logs/operator.log" >&2
  exit 1
fi
