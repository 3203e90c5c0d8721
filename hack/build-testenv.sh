#!/usr/bin/env bash
# Builds the test control plane binaries (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)
# from published Go modules into a version-keyed cache, only when they are missing.
#   hack/build-testenv.sh            build what is missing, print the bin directory of each component
#   hack/build-testenv.sh --print    print the bin directories without building
# The cache lives in ${CODER_K8S_TESTENV_CACHE:-$HOME/.cache/coder-k8s/testenv}; delete it to force a rebuild.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${CODER_K8S_TESTENV_CACHE:-$HOME/.cache/coder-k8s/testenv}
mode=${1:-build}

# component  module-dir  version  ldflags-kind  binaries(import path=name,...)
components=(
  "etcd|testenv/go/etcd|v3.6.16|etcd|go.etcd.io/etcd/server/v3=etcd"
  "k8s|testenv/go/k8s|v1.36.3|k8s|k8s.io/kubernetes/cmd/kube-apiserver=kube-apiserver,k8s.io/kubernetes/cmd/kube-controller-manager=kube-controller-manager,k8s.io/kubernetes/cmd/kube-scheduler=kube-scheduler"
  "kwok|testenv/go/kwok|v0.8.0|kwok|sigs.k8s.io/kwok/cmd/kwok=kwok"
)

need() {
  command -v "$1" >/dev/null 2>&1 || {
    echo "error: '$1' is not installed; $2" >&2
    exit 1
  }
}

key_of() { # version + hash of go.mod/go.sum, so a changed pin builds a new cache entry
  local dir=$1 version=$2
  printf '%s-%s' "$version" "$(cat "$root/$dir/go.mod" "$root/$dir/go.sum" | sha256sum | cut -c1-12)"
}

ldflags_of() {
  local kind=$1 version=$2
  case $kind in
    k8s)
      local minor=${version#v1.}; minor=${minor%%.*}
      echo "-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$version -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"
      ;;
    kwok) echo "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${version}" ;;
    *) echo "-s -w" ;;
  esac
}

for entry in "${components[@]}"; do
  IFS='|' read -r name dir version kind bins <<<"$entry"
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
    need go "install Go 1.26 (https://go.dev/dl) or your distribution's golang package; Go builds the test control plane only"
    echo "building $name $version (module $dir) into $bin ..." >&2
    start=$(date +%s)
    mkdir -p "$bin.tmp"
    for pair in "${missing[@]}"; do
      pkg=${pair%=*} out=${pair#*=}
      if ! (cd "$root/$dir" && CGO_ENABLED=0 go build -trimpath -tags selinux,notest,grpcnotrace \
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
