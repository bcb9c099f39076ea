#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, snapshot, compile-fail and integration tests.
# Integration tests start their own local control plane (or use the cluster named by
# KFOP_TEST_KUBECONFIG); the plane's binaries are built once into ~/.cache/kfop if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

# The Go builds (control plane, Kubeflow's operators, Kueue, Helm, kustomize, crane: about 30
# minutes on two cores with a cold cache, nothing with a warm one) run beside the Rust build
# below, which leaves a core idle while it links; their log is printed when they are waited for.
go_log=$(mktemp)
trap 'rm -f "$go_log"' EXIT
go_builds() {
  step "control plane binaries"
  bin=$(testenv/controlplane/build.sh | tail -n 1)
  echo "using $bin"

  step "Kubeflow's operators as peers (the conformance oracle) and Kueue"
  testenv/peers/build.sh training-operator
  testenv/peers/build.sh training-operator-v1.9.0
  testenv/peers/build.sh mpi-operator-v0.6.0
  testenv/peers/build.sh kueue-v0.17.0   # the kueue test runs it next to kfop
  testenv/peers/build.sh kueue-v0.19.2   # kueue (Kubeflow integrations on) and kueue_pod_groups (off)
  testenv/peers/build.sh katib-v0.19.0   # controller, db-manager, goptuna: the katib test

  # The install test renders the chart and the overlays, and packs and reads back the image.
  step "Helm, kustomize and crane"
  testenv/tools/build.sh helm
  testenv/tools/build.sh kustomize
  testenv/tools/build.sh crane
}
go_builds >"$go_log" 2>&1 &
go_pid=$!

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
# Packing only: the scaffold test (tests/scaffold.rs) installs kfop from these packages and builds
# and runs a scaffold against them, which checks more than cargo's own verification build.
cargo package --quiet --allow-dirty --no-verify -p kfop-crd-rules -p kfop-derive -p kfop-testenv -p kfop-runtime -p kfop

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

step "cargo test --workspace --no-run"
cargo test --workspace --no-run --quiet

step "waiting for the Go builds"
go_status=0
wait "$go_pid" || go_status=$?
cat "$go_log"
if [ "$go_status" -ne 0 ]; then
  printf '\nFAILED: the Go builds (exit %s)\n' "$go_status" >&2
  exit 1
fi

step "cargo test --workspace, two targets at a time"
# Every target runs so one failure does not hide another; any failing test fails the suite, with
# the failed tests listed again at the end (the engine tests print the job's status and its pods'
# phases when a wait times out).
python3 scripts/test_lanes.py
