#!/usr/bin/env bash
# Builds a peer operator (another implementation of the Kubeflow APIs, run as an oracle and a
# benchmark baseline) from its Go module into a cache outside the repository, keyed by name and
# version: build.sh <peer> builds the one described by the folder testenv/peers/<peer>/ (a wrapper
# go.mod pinning the module, and peer.env naming its main package and manifests). Copies the
# module's CRDs (and webhook manifest) next to the binary. Prints the binary's path on stdout as
# its last line; logs go to stderr. A warm cache returns at once.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
peer=${1:?usage: build.sh <peer folder, e.g. training-operator>}
dir="$here/$peer"
[ -f "$dir/go.mod" ] && [ -f "$dir/peer.env" ] || { echo "build.sh: no peer $peer in $here" >&2; exit 1; }
name='' module='' main='' crds='' webhooks=''
# shellcheck source=/dev/null
. "$dir/peer.env"
name=${name:-$peer}
# The version is read from the wrapper go.mod so there is one place to bump it.
version=$(awk -v m="$module" '$1==m{print $2} $1=="require"&&$2==m{print $3}' "$dir/go.mod" | head -n 1)
[ -n "$version" ] || { echo "build.sh: $dir/go.mod does not require $module" >&2; exit 1; }
cache_root=${KFOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfop}
out="$cache_root/peers/$name-$version"
bin="$out/bin/$name"

if [ -x "$bin" ] && [ -d "$out/crds" ]; then
  echo "$bin"
  exit 0
fi

# One build at a time per peer version (test binaries may start in parallel); the winner's
# result is then reused.
mkdir -p "$cache_root/peers"
if command -v flock >/dev/null; then
  exec 9>"$out.lock"
  flock 9
  if [ -x "$bin" ] && [ -d "$out/crds" ]; then echo "$bin"; exit 0; fi
fi

command -v go >/dev/null || { echo "build.sh: Go is not installed; install Go >= 1.24 first" >&2; exit 1; }
log() { printf '[peer %s] %s\n' "$name-$version" "$*" >&2; }
log "cold build into $out; a few minutes on 2 cores the first time, later runs reuse the cache"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
rm -rf "$out.partial"
mkdir -p "$out.partial/bin" "$out.partial/crds"
start=$(date +%s)
(cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$out.partial/bin/$name" "$module/$main")
log "built $name in $(( $(date +%s) - start ))s"

# Manifests come from the module source the build just used (read-only in the module cache).
src=$(cd "$dir" && go list -m -f '{{.Dir}}' "$module")
# shellcheck disable=SC2086 # crds is a glob
cp "$src"/$crds "$out.partial/crds/"
[ -z "$webhooks" ] || cp "$src/$webhooks" "$out.partial/webhooks.yaml"
chmod -R u+w "$out.partial"

rm -rf "$out"
mv "$out.partial" "$out"
echo "$bin"
