#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, snapshot, compile-fail and integration tests.
# Integration tests start their own local control plane (or use the cluster named by
# KFOP_TEST_KUBECONFIG); the plane's binaries are built once into ~/.cache/kfop if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "control plane binaries"
bin=$(testenv/controlplane/build.sh | tail -n 1)
echo "using $bin"

step "Kubeflow's operators as peers (the conformance oracle) and Kueue"
testenv/peers/build.sh training-operator
testenv/peers/build.sh training-operator-v1.9.0
testenv/peers/build.sh mpi-operator-v0.6.0
testenv/peers/build.sh kueue-v0.17.0   # the kueue test runs it next to kfop

step "Helm and kustomize (the install test renders the chart and the overlays with them)"
testenv/tools/build.sh helm
testenv/tools/build.sh kustomize

step "Python environments for the Kubeflow SDK tests (SDK 1.8.1 and 1.9.0)"
cache=${KFOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfop}
# sdk_venv <requirements file> <venv name>: (re)creates the venv when the file changed; prints
# its python.
sdk_venv() {
  local venv="$cache/$2"
  local stamp="$venv/.requirements-$(sha256sum "$1" | cut -c1-16)"
  if [ ! -e "$stamp" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$1" >&2
    touch "$stamp"
  fi
  echo "$venv/bin/python"
}
KFOP_SDK_PYTHON=$(sdk_venv tests/sdk/requirements.txt sdk-venv)
KFOP_SDK_1_9_PYTHON=$(sdk_venv tests/sdk/requirements-1.9.txt sdk-venv-1.9)
export KFOP_SDK_PYTHON KFOP_SDK_1_9_PYTHON

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "cargo package: the library crates and the CLI are publishable"
# Cargo verifies against the crates it just packed as if they came from a registry, and treats
# registry crates as immutable: an unpacked copy (in a registry directory keyed by the checkout's
# path) or a build of it left by an earlier run is reused, so a checkout at a path seen before
# would verify against old sources. Both go first; crates.io's unpacked crates are not touched.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/kfop-*
cargo clean --quiet -p kfop-crd-rules -p kfop-derive -p kfop-testenv -p kfop-runtime -p kfop
cargo package --quiet --allow-dirty -p kfop-crd-rules -p kfop-derive -p kfop-testenv -p kfop-runtime -p kfop

step "kfop gen --check on every bundled operator"
for manifest in examples/*/kfop.yaml; do
  cargo run --quiet -p kfop -- gen --check --dir "$(dirname "$manifest")"
done

step "kfop-operator does not link kfop-testenv (the demo is kfop-demo)"
# The tree is captured first: a failing `cargo tree` stops the suite (set -e) instead of passing.
tree=$(cargo tree --quiet -p kfop-operator -e normal --prefix none)
if grep -q '^kfop-testenv ' <<<"$tree"; then
  printf '\nFAILED: kfop-operator depends on kfop-testenv (cargo tree -p kfop-operator -e normal)\n' >&2
  exit 1
fi

step "cargo test --workspace"
# Every target runs (--no-fail-fast) so one failure does not hide another; any failing test fails
# the suite, with the failed tests listed again at the end (the engine tests print the job's
# status and its pods' phases when a wait times out).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if cargo test --workspace --no-fail-fast 2>&1 | tee "$log"; then
  exit 0
fi
printf '\nFAILED: cargo test --workspace\n' >&2
grep -E '^---- .* stdout ----$|^error: test failed|^    [a-z_:]+$' "$log" | sed 's/^/FAILED: /' >&2 || true
exit 1
