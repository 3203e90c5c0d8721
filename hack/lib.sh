# Shared helpers of the hack/ scripts.
step() { printf '\n==> %s\n' "$*" >&2; }

require_tool() {
  command -v "$1" >/dev/null 2>&1 || {
    echo "error: '$1' is not installed; $2" >&2
    exit 1
  }
}
