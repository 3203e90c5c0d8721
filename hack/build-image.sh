#!/usr/bin/env bash
# Builds the coder-k8s image without a container daemon: static musl binaries for linux/amd64 and linux/arm64, then
# `cargo xtask image-write` puts them into an OCI image layout (oci-layout, index.json, blobs/sha256/...).
#   hack/build-image.sh OUT     write the layout to OUT
#   hack/build-image.sh         write it into a cache under ~/.cache/coder-k8s/image keyed by the binaries, version and
#                               revision (reused when they have not changed); prints the layout's path on stdout
# Environment: CODER_K8S_IMAGE_VERSION (default: the workspace version), CODER_K8S_IMAGE_PROFILE (cargo profile,
# default release; CI uses image-ci), CODER_K8S_CA_BUNDLE (default /etc/ssl/certs/ca-certificates.crt),
# CODER_K8S_IMAGE_TARGET_DIR (cargo target dir of the musl builds, default CARGO_TARGET_DIR or target/).
# Push a layout with `skopeo copy --all oci:OUT:VERSION docker://REGISTRY/coder-k8s:VERSION`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
source hack/lib.sh

out=${1:-}
profile=${CODER_K8S_IMAGE_PROFILE:-release}
ca_bundle=${CODER_K8S_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
target_dir=${CODER_K8S_IMAGE_TARGET_DIR:-${CARGO_TARGET_DIR:-$root/target}}
version=${CODER_K8S_IMAGE_VERSION:-$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)}
revision=${CODER_K8S_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)

require_tool cargo "install Rust with rustup (https://rustup.rs)"
[[ -s $ca_bundle ]] || {
  echo "error: no CA bundle at $ca_bundle (the image needs one for HTTPS to Coder); install the Debian package" \
    "ca-certificates or set CODER_K8S_CA_BUNDLE" >&2
  exit 1
}

# ring compiles C (and assembly) for the target: the host's gcc serves x86_64, arm64 needs a cross compiler.
if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    step "install the arm64 C cross compiler (gcc-aarch64-linux-gnu)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gcc-aarch64-linux-gnu >&2
  else
    echo "error: aarch64-linux-gnu-gcc not found; install the Debian package gcc-aarch64-linux-gnu" >&2
    exit 1
  fi
fi
installed=$(rustup target list --installed 2>/dev/null || true)
for target in "${targets[@]}"; do
  grep -qx "$target" <<<"$installed" || rustup target add "$target" >&2
done

step "build the static binaries ($profile profile: ${targets[*]})"
export CC_x86_64_unknown_linux_musl=${CC_x86_64_unknown_linux_musl:-gcc}
export CC_aarch64_unknown_linux_musl=${CC_aarch64_unknown_linux_musl:-aarch64-linux-gnu-gcc}
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER=${CARGO_TARGET_AARCH64_UNKNOWN_LINUX_MUSL_LINKER:-aarch64-linux-gnu-gcc}
export CODER_K8S_COMMIT=$revision
target_args=()
for target in "${targets[@]}"; do target_args+=(--target "$target"); done
CARGO_TARGET_DIR=$target_dir cargo build --locked --quiet -p coder-k8s --profile "$profile" "${target_args[@]}" >&2
amd64="$target_dir/x86_64-unknown-linux-musl/$profile/coder-k8s"
arm64="$target_dir/aarch64-unknown-linux-musl/$profile/coder-k8s"

if [[ -z $out ]]; then
  cache=${CODER_K8S_IMAGE_CACHE:-$HOME/.cache/coder-k8s/image}
  key=$(cat "$amd64" "$arm64" "$ca_bundle" <(echo "$version $revision") xtask/src/image.rs | sha256sum | cut -c1-16)
  out="$cache/$version-$key"
  if [[ -s $out/index.json ]]; then
    echo "image layout up to date: $out" >&2
    echo "$out"
    exit 0
  fi
  # Keep only the newest layout: each one holds two release binaries.
  rm -rf "${cache:?}"/*
fi

step "write the OCI image layout $out ($version, revision $revision)"
CARGO_TARGET_DIR=$target_dir cargo xtask image-write "$out" --version "$version" --revision "$revision" \
  --ca-bundle "$ca_bundle" --amd64 "$amd64" --arm64 "$arm64" >&2
echo "$out"
