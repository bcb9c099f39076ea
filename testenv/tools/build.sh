#!/usr/bin/env bash
# Builds a command-line tool the tests drive (Helm, kustomize) from its Go module into a cache
# outside the repository, keyed by name and version, like ../peers/build.sh: build.sh <tool>
# builds the one described by the folder testenv/tools/<tool>/ (a wrapper go.mod pinning the
# module, and tool.env naming its main package and link flags) into
# ${KFOP_CACHE_DIR:-~/.cache/kfop}/tools/<name>-<version>/bin/<name>. Prints the binary's path on
# stdout as its last line; logs go to stderr. A warm cache returns at once.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tool=${1:?usage: build.sh <tool folder, e.g. helm>}
dir="$here/$tool"
[ -f "$dir/go.mod" ] && [ -f "$dir/tool.env" ] || { echo "build.sh: no tool $tool in $here" >&2; exit 1; }
name='' module='' main='' version_var='' x_flags=''
# shellcheck source=/dev/null
. "$dir/tool.env"
name=${name:-$tool}
# The version is read from the wrapper go.mod so there is one place to bump it.
version=$(awk -v m="$module" '$1==m{print $2} $1=="require"&&$2==m{print $3}' "$dir/go.mod" | head -n 1)
[ -n "$version" ] || { echo "build.sh: $dir/go.mod does not require $module" >&2; exit 1; }
cache_root=${KFOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfop}
out="$cache_root/tools/$name-$version"
bin="$out/bin/$name"

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

# One build at a time per tool version (test binaries may start in parallel); the winner's
# result is then reused.
mkdir -p "$cache_root/tools"
if command -v flock >/dev/null; then
  exec 9>"$out.lock"
  flock 9
  if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
fi

command -v go >/dev/null || { echo "build.sh: Go is not installed; install Go >= 1.24 first" >&2; exit 1; }
log() { printf '[tool %s] %s\n' "$name-$version" "$*" >&2; }
log "cold build into $out; a few minutes on 2 cores the first time, later runs reuse the cache"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
ldflags="-s -w"
[ -z "$version_var" ] || ldflags="$ldflags -X $version_var=$version"
for x in $x_flags; do ldflags="$ldflags -X $x"; done
rm -rf "$out.partial"
mkdir -p "$out.partial/bin"
start=$(date +%s)
(cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$out.partial/bin/$name" "$module${main:+/$main}")
log "built $name in $(( $(date +%s) - start ))s"

rm -rf "$out"
mv "$out.partial" "$out"
echo "$bin"
