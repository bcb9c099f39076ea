#!/usr/bin/env bash
# Builds a peer operator (another implementation of the Kubeflow APIs, run as an oracle and a
# benchmark baseline, or Kueue next to kfop) from its Go module into the cache: build.sh <peer>
# builds the one described by the folder testenv/peers/<peer>/ (a wrapper go.mod pinning the
# module, and peer.env naming its main package and manifests), and copies the module's CRDs (and
# webhook manifest) next to the binary. The build itself is ../go-module-build.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../go-module-build.sh
. "$here/../go-module-build.sh"

is_complete() { [ -d "$1/crds" ]; }
after_build() {
  mkdir -p "$2/crds"
  # shellcheck disable=SC2086 # crds is a glob
  cp "$1"/$crds "$2/crds/"
  [ -z "$webhooks" ] || cp "$1/$webhooks" "$2/webhooks.yaml"
}
go_module_build peer "$here/${1:?usage: build.sh <peer folder, e.g. training-operator>}" peer.env
