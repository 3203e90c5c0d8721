#!/usr/bin/env bash
# Builds the test control plane binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok), the
# open-source Coder server (coder, plus echotar, which writes echo-provisioner template archives), the helm CLI (chart
# tests), promtool (alerting rule tests), gitopseval (the GitOps health rules in Argo CD's and Flux's engines), and
# terraform with Coder's Terraform provider (real Coder's Terraform provisioner imports file-based templates
# with them, offline) from published Go modules into a version-keyed cache, only when they are missing.
#   hack/build-testenv.sh [COMPONENT...]            build what is missing, print the bin directory of each component
#   hack/build-testenv.sh --print [COMPONENT...]    print the bin directories without building
# COMPONENT is etcd, k8s, kwok, coder, helm, prometheus, gitops, terraform or terraform-provider-coder; all of them
# without any.
# The cache lives in ${CODER_K8S_TESTENV_CACHE:-$HOME/.cache/coder-k8s/testenv}; delete it to force a rebuild.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${CODER_K8S_TESTENV_CACHE:-$HOME/.cache/coder-k8s/testenv}
mode=build
if [[ ${1:-} == --print ]]; then
  mode=--print
  shift
fi
selected=("$@")

# component  module-dir  version  ldflags-kind  binaries(import path=name,...)
components=(
  "etcd|testenv/go/etcd|v3.6.16|etcd|go.etcd.io/etcd/server/v3=etcd"
  "k8s|testenv/go/k8s|v1.36.3|k8s|k8s.io/kubernetes/cmd/kube-apiserver=kube-apiserver,k8s.io/kubernetes/cmd/kube-controller-manager=kube-controller-manager,k8s.io/kubernetes/cmd/kube-scheduler=kube-scheduler"
  "kwok|testenv/go/kwok|v0.8.0|kwok|sigs.k8s.io/kwok/cmd/kwok=kwok"
  "coder|testenv/go/coder|v2.30.0|coder|github.com/coder/coder/v2/cmd/coder=coder,coder-k8s.invalid/testenv/coder/echotar=echotar"
  "helm|testenv/go/helm|v3.22.0|helm|helm.sh/helm/v3/cmd/helm=helm"
  # promtool: checks and unit-tests the alerting rules of config/prometheus.
  "prometheus|testenv/go/prometheus|v0.316.0|plain|github.com/prometheus/prometheus/cmd/promtool=promtool"
  # Runs the GitOps health rules in Argo CD's Lua engine (gopher-lua) and Flux's CEL (cel-go); the version names both.
  "gitops|testenv/go/gitops|cel-go-v0.31.0-gopher-lua-v1.1.2|plain|coder-k8s.invalid/testenv/gitops/gitopseval=gitopseval"
  "terraform|testenv/go/terraform|v1.5.7|plain|github.com/hashicorp/terraform=terraform"
  # Named as a filesystem mirror expects it (registry.terraform.io/coder/coder/<version>/linux_amd64/...).
  "terraform-provider-coder|testenv/go/terraform-provider-coder|v2.13.1|plain|github.com/coder/terraform-provider-coder/v2=terraform-provider-coder_v2.13.1"
)

for want in "${selected[@]}"; do
  [[ " ${components[*]%%|*} " == *" $want "* ]] || {
    echo "error: unknown component '$want' (known: ${components[*]%%|*})" >&2
    exit 2
  }
done

need() {
  command -v "$1" >/dev/null 2>&1 || {
    echo "error: '$1' is not installed; $2" >&2
    exit 1
  }
}

key_of() { # version + hash of go.mod/go.sum (and the module's own Go files), so a changed pin builds a new cache entry
  local dir=$1 version=$2 own
  own=$(cd "$root/$dir" && find . -name '*.go' -type f | LC_ALL=C sort)
  printf '%s-%s' "$version" "$(cd "$root/$dir" && cat go.mod go.sum $own | sha256sum | cut -c1-12)"
}

ldflags_of() {
  local kind=$1 version=$2
  case $kind in
    k8s)
      local minor=${version#v1.}; minor=${minor%%.*}
      echo "-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$version -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
      ;;
    kwok) echo "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${version}" ;;
    helm) echo "-s -w -X helm.sh/helm/v3/internal/version.version=${version} -X helm.sh/helm/v3/internal/version.gitTreeState=clean" ;;
    # The tag without its leading v (Coder adds it); agpl marks the open-source build.
    coder) echo "-s -w -X github.com/coder/coder/v2/buildinfo.tag=${version#v} -X github.com/coder/coder/v2/buildinfo.agpl=true" ;;
    *) echo "-s -w" ;;
  esac
}

tags_of() {
  case $1 in
    # Coder's own release tags minus embed (no web UI: the tests use the API only).
    coder) echo "ts_omit_aws,ts_omit_bird,ts_omit_tap,ts_omit_kube" ;;
    *) echo "selinux,notest,grpcnotrace" ;;
  esac
}

for entry in "${components[@]}"; do
  IFS='|' read -r name dir version kind bins <<<"$entry"
  if ((${#selected[@]} > 0)) && [[ " ${selected[*]} " != *" $name "* ]]; then
    continue
  fi
  bin="$cache/$name-$(key_of "$dir" "$version")/bin"
  if [[ $mode == --print ]]; then
    echo "$name=$bin"
    continue
  fi
  missing=()
  IFS=',' read -ra pairs <<<"$bins"
  for pair in "${pairs[@]}"; do
    [[ -x "$bin/${pair#*=}" ]] || missing+=("$pair")
  done
  if ((${#missing[@]} > 0)); then
    need go "install Go 1.26 (https://go.dev/dl) or your distribution's golang package; Go builds the test binaries only"
    echo "building $name $version (module $dir) into $bin ..." >&2
    start=$(date +%s)
    mkdir -p "$bin.tmp"
    for pair in "${missing[@]}"; do
      pkg=${pair%=*} out=${pair#*=}
      if ! (cd "$root/$dir" && GOTOOLCHAIN=local CGO_ENABLED=0 go build -trimpath -tags "$(tags_of "$kind")" \
        -ldflags "$(ldflags_of "$kind" "$version")" -o "$bin.tmp/$out" "$pkg"); then
        echo "error: go build of $pkg failed (module $dir, $name $version); see the output above." >&2
        echo "       Check that the Go module proxy serves every module in $dir/go.mod (go mod download in $dir)." >&2
        exit 1
      fi
    done
    mkdir -p "$bin"
    mv "$bin.tmp"/* "$bin"/ && rmdir "$bin.tmp"
    echo "built $name $version in $(($(date +%s) - start)) s" >&2
  fi
  echo "$name=$bin"
done
