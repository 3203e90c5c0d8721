#!/usr/bin/env bash
# The local environment: a real Kubernetes control plane on this machine (etcd, kube-apiserver, controller manager,
# scheduler and kwok fake nodes, all built from Go modules), the CRDs and RBAC, the operator running out of cluster,
# and the samples. Stop it with hack/local-down.sh. State and logs live in .local/.
#   hack/local-up.sh                the Coder API test server stands in for Coder (every sample reaches Ready)
#   hack/local-up.sh --real-coder   the real open-source Coder server v2.30.0 instead, with a sample template and
#                                   workspace; the samples that need a licence (provisioner, workspace proxy) say
#                                   so in their status, because the open-source server has no licence routes
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

require_tool cargo "install Rust with rustup (https://rustup.rs)"
require_tool go "install Go 1.26 (https://go.dev/dl); it builds the local control plane"
require_tool kubectl "install kubectl v1.32 or newer"

state="$root/.local"
mkdir -p "$state/logs"
if [[ -f "$state/testenv.pid" ]] && kill -0 "$(cat "$state/testenv.pid")" 2>/dev/null; then
  echo "the local environment is already running; stop it first with hack/local-down.sh" >&2
  exit 1
fi

step "build the control plane binaries from Go modules (cached in ~/.cache/coder-k8s)"
hack/build-testenv.sh etcd k8s kwok >/dev/null

step "build coder-k8s, the local control plane runner and the Coder API test server"
cargo build --quiet -p coder-k8s -p coder-k8s-testenv -p coder-k8s-coder-testserver
bin="${CARGO_TARGET_DIR:-$root/target}/debug"

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
# real Coder server runs on 127.0.0.1:80, the port of the sample control plane's Service, and the operator resolves
# Service hosts to 127.0.0.1.
CODER_DATABASE_URL=$(cat "$state/testenv/postgres-url")
if $real_coder; then
  source hack/local-real-coder.sh
else
  step "start the Coder API test server in place of Coder (127.0.0.1:80)"
  nohup "$bin"/coder-k8s-coder-testserver --database-url "$(cat "$state/testenv/postgres-url")" \
    --listen 127.0.0.1:80 --entitle external_provisioner_daemons workspace_proxy >"$state/logs/coder.log" 2>&1 &
  echo $! >"$state/coder.pid"
  sleep 1
  if ! kill -0 "$(cat "$state/coder.pid")" 2>/dev/null; then
    echo "error: the Coder API test server did not start; see $state/logs/coder.log" >&2
    echo "       Binding 127.0.0.1:80 needs root or CAP_NET_BIND_SERVICE:" >&2
    echo "       sudo setcap cap_net_bind_service=+ep $bin/coder-k8s-coder-testserver" >&2
    tail -5 "$state/logs/coder.log" >&2
    exit 1
  fi
fi

step "run the operator out of cluster (--app=all: the controllers and the aggregated API server on 127.0.0.1:6443)"
POD_NAMESPACE=coder-system nohup "$bin"/coder-k8s --app=all --service-address-override=127.0.0.1 \
  --health-probe-bind-address=127.0.0.1:18081 --apiserver-bind-address=127.0.0.1:6443 \
  >"$state/logs/operator.log" 2>&1 &
echo $! >"$state/operator.pid"

# kube-apiserver reaches the out-of-cluster server through an ExternalName Service (there is no kube-proxy here);
# with that Service type it dials the APIService's port directly. The server fills the APIService caBundle itself.
step "register the aggregated API (APIService v1alpha1.aggregation.coder.com)"
kubectl apply -f hack/local/apiserver-service.yaml -f deploy/apiserver-apiservice.yaml >/dev/null
kubectl patch apiservice v1alpha1.aggregation.coder.com --type=merge -p '{"spec":{"service":{"port":6443}}}' >/dev/null
for _ in $(seq 1 60); do
  kubectl get --raw /apis/aggregation.coder.com/v1alpha1 >/dev/null 2>&1 && break
  kill -0 "$(cat "$state/operator.pid")" 2>/dev/null || { echo "the operator stopped; see $state/logs/operator.log" >&2; tail -20 "$state/logs/operator.log" >&2; exit 1; }
  sleep 1
done
kubectl get --raw /apis/aggregation.coder.com/v1alpha1 >/dev/null || { echo "the aggregated API does not answer; see $state/logs/operator.log" >&2; exit 1; }

step "apply the samples (the control plane uses the local PostgreSQL through spec.database)"
kubectl create namespace coder --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl -n coder create secret generic coder-db-app --from-literal=uri="$CODER_DATABASE_URL" \
  --dry-run=client -o yaml | kubectl apply -f - >/dev/null
kubectl apply -f config/samples/
kubectl -n coder patch codercontrolplane codercontrolplane-sample --type=merge \
  -p '{"spec":{"database":{"connectionSecretRef":{"name":"coder-db-app","key":"uri"}}}}' >/dev/null
step "wait for the control plane (and, with the test server, the provisioner) to be Ready"
kubectl -n coder wait codercontrolplane/codercontrolplane-sample --for=jsonpath='{.status.operatorAccessReady}'=true --timeout=120s >/dev/null || true
if ! $real_coder; then
  kubectl -n coder wait coderprovisioner/coderprovisioner-sample --for=jsonpath='{.status.phase}'=Ready --timeout=120s >/dev/null || true
  # The real Coder already holds a sample template and workspace (echo provisioner); the test server gets them
  # through the aggregated API, the way a user applies them from Git.
  step "apply the sample CoderTemplate and CoderWorkspace through the aggregated API"
  kubectl apply -f config/samples/aggregation/aggregation_v1alpha1_codertemplate.yaml
  kubectl apply -f config/samples/aggregation/aggregation_v1alpha1_coderworkspace.yaml
fi

kubectl get codercontrolplanes,coderprovisioners,coderworkspaceproxies,codertemplatetests,coderaiproviders,coderaigatewaykeys,codermcpservers -n coder
kubectl get coderworkspaces,codertemplates -A
cat <<MSG

The local environment is running.
  export KUBECONFIG=$KUBECONFIG
  kubectl get nodes; kubectl get all -n coder
  kubectl get --raw /apis/aggregation.coder.com/v1alpha1; kubectl get coderworkspaces,codertemplates -A
A PostgreSQL with Coder's tables runs for the operator-access bootstrap; its URL is in $state/testenv/postgres-url:
  kubectl -n coder create secret generic coder-db-app --from-literal=uri="\$(cat $state/testenv/postgres-url)"
Coder's image does not run here (kwok pods are fake): $(if $real_coder; then echo "the real Coder server v2.30.0 answers on http://127.0.0.1:80 (owner admin@coder.local; password in $state/coder/owner-password, session token in $state/coder/owner-token; template and workspace \"sample\")"; else echo "the Coder API test server answers on 127.0.0.1:80 in its place"; fi).
Logs: $state/logs/ (operator.log, testenv.log) and $state/testenv/logs/.
Stop it: hack/local-down.sh
MSG
