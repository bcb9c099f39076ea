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

step "Python environment for the Kubeflow SDK test"
cache=${KFOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfop}
venv="$cache/sdk-venv"
stamp="$venv/.requirements-$(sha256sum tests/sdk/requirements.txt | cut -c1-16)"
if [ ! -e "$stamp" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r tests/sdk/requirements.txt
  touch "$stamp"
fi
export KFOP_SDK_PYTHON="$venv/bin/python"

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

step "kfop gen --check on every bundled operator"
for manifest in examples/*/kfop.yaml; do
  cargo run --quiet -p kfop -- gen --check --dir "$(dirname "$manifest")"
done

step "cargo test --workspace"
# A failing test target is run once more, alone: a target that fails twice fails the suite; one
# that passes the second time is reported as FLAKY (with the first run's failures above), so
# a timing-dependent integration test cannot hide, nor sink an otherwise green run.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if cargo test --workspace --no-fail-fast 2>&1 | tee "$log"; then
  exit 0
fi
mapfile -t targets < <(grep -oE 'to rerun pass `[^`]+`|^    `-p [^`]+`' "$log" | grep -oE -- '-p [^`]+' | sort -u)
if [ "${#targets[@]}" -eq 0 ]; then
  echo "cargo test failed before running tests" >&2
  exit 1
fi
for target in "${targets[@]}"; do
  step "rerunning $target"
  # shellcheck disable=SC2086
  cargo test $target
done
printf '\nFLAKY: these targets failed once and passed when rerun: %s\n' "${targets[*]}" >&2
grep -E '^---- .* stdout ----$' "$log" | sed 's/^/FLAKY: /' >&2 || true
