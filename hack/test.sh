#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script):
# format check, clippy, generated-file drift check, the image build, unit and integration tests on a real etcd +
# kube-apiserver (the Helm chart and the image included). It builds the Go test tools (control plane, Coder, helm)
# into ~/.cache/coder-k8s when missing.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
source hack/lib.sh

require_tool cargo "install Rust with rustup (https://rustup.rs); rust-toolchain.toml pins the version"
require_tool go "install Go 1.26 (https://go.dev/dl); it builds the test binaries (control plane, Coder) only"
require_tool kubectl "install kubectl v1.32 or newer (https://kubernetes.io/docs/tasks/tools/)"
require_tool python3 "install Python 3.10 or newer with its venv module; the MCP tests run the official Python MCP client (pip-installed into ~/.cache/coder-k8s on first use)"

step "build the test control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok), the real Coder server and helm if missing"
hack/build-testenv.sh

step "install PostgreSQL if missing (operator-access integration tests run a real server)"
if compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  echo "PostgreSQL server binaries found" >&2
elif [ "$(id -u)" -eq 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql
else
  echo "error: PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin; install the Debian package postgresql (sudo apt-get install -y postgresql)" >&2
  exit 1
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "generated files are up to date (CRDs, API reference, dist/install.yaml)"
cargo xtask check

step "build the image (static musl binaries for amd64 and arm64, OCI layout; reused while they are unchanged)"
# The image-ci profile is unoptimised to keep CI time (it checks the image, not its speed); releases use the release profile.
CODER_K8S_IMAGE_LAYOUT=$(CODER_K8S_IMAGE_PROFILE=${CODER_K8S_IMAGE_PROFILE:-image-ci} hack/build-image.sh)
export CODER_K8S_IMAGE_LAYOUT

step "cargo test (unit tests and integration tests on the real control plane)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --all-targets --locked --no-fail-fast -- --test-threads="${CODER_K8S_TEST_THREADS:-4}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line for the whole workspace (cargo prints one result line per test binary).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "\ncargo-test: %d passed, %d failed\n", p, f }' "$log"
# Each failure's panic message again, last: the output of a long run may be cut short from the middle, and the
# "failures:" sections are far from the end.
if [ "$status" -ne 0 ]; then
  echo "the failed tests' panics (their whole output is above):"
  grep -A 3 -E "^thread '.*' \([0-9]+\) panicked at|^thread '.*' panicked at" "$log" | grep -v "^Stack backtrace:" | head -n 80 || true
fi
exit "$status"
