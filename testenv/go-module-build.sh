#!/usr/bin/env bash
# The one Go build behind testenv/peers/build.sh and testenv/tools/build.sh: sourced by them, it
# builds the main package a folder describes (a wrapper go.mod pinning the module, and an env
# file naming the package) into a cache outside the repository keyed by name and version,
# ${KFOP_CACHE_DIR:-~/.cache/kfop}/<kind>s/<name>-<version>/bin/<name>, and prints the binary's
# path on stdout as its last line; logs go to stderr. A warm cache returns at once.
#
# go_module_build <kind: peer|tool> <folder> <env file name>
# The env file sets name (default: the folder's name), module, main, and optionally version_var,
# x_flags (link-time -X flags) and also (more main packages of the same module, built next to the
# first: space-separated `<binary>=<main package>`, e.g. `db-manager=cmd/db-manager/v1beta1`) and
# overlay (space-separated `<path in the module>=<file in the folder>`: files added to, or
# replacing files of, the module for this build). A caller may define `after_build <module source dir>
# <partial output dir>` for extra files, and `is_complete <output dir>` for what a finished
# cache entry holds besides the binary.
set -euo pipefail

go_module_build() {
  local kind=$1 dir=$2 env_file=$3
  [ -f "$dir/go.mod" ] && [ -f "$dir/$env_file" ] || {
    echo "build.sh: no $kind $(basename "$dir") in $(dirname "$dir")" >&2
    exit 1
  }
  name='' module='' main='' version_var='' x_flags='' also='' overlay='' crds='' webhooks=''
  # shellcheck source=/dev/null
  . "$dir/$env_file"
  name=${name:-$(basename "$dir")}
  # The version is read from the wrapper go.mod so there is one place to bump it.
  local version
  version=$(awk -v m="$module" '$1==m{print $2} $1=="require"&&$2==m{print $3}' "$dir/go.mod" | head -n 1)
  [ -n "$version" ] || { echo "build.sh: $dir/go.mod does not require $module" >&2; exit 1; }
  local cache_root=${KFOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfop}
  local out="$cache_root/${kind}s/$name-$version"
  local bin="$out/bin/$name"
  complete() {
    [ -x "$bin" ] || return 1
    local also_pair
    for also_pair in $also; do [ -x "$out/bin/${also_pair%%=*}" ] || return 1; done
    ! declare -F is_complete >/dev/null || is_complete "$out"
  }

  if complete; then echo "$bin"; return 0; fi
  # One build at a time per version (test binaries may start in parallel); the winner's result
  # is then reused.
  mkdir -p "$cache_root/${kind}s"
  if command -v flock >/dev/null; then
    exec 9>"$out.lock"
    flock 9
    if complete; then echo "$bin"; return 0; fi
  fi

  command -v go >/dev/null || { echo "build.sh: Go is not installed; install Go 1.26 or later first (the control plane's go.mod asks for 1.26)" >&2; exit 1; }
  log() { printf '[%s %s] %s\n' "$kind" "$name-$version" "$*" >&2; }
  log "cold build into $out; a few minutes on 2 cores the first time, later runs reuse the cache"
  export CGO_ENABLED=0 GOFLAGS=-buildvcs=false
  local ldflags="-s -w" x
  [ -z "$version_var" ] || ldflags="$ldflags -X $version_var=$version"
  for x in $x_flags; do ldflags="$ldflags -X $x"; done
  rm -rf "$out.partial"
  mkdir -p "$out.partial/bin"
  local start
  start=$(date +%s)
  # With an overlay, the build runs in a copy of the folder whose go.mod replaces the module with
  # a writable copy of its source holding the overlay's files (go build -overlay refuses files
  # in the module cache); the copy goes once the binary is built.
  local build_dir=$dir
  if [ -n "$overlay" ]; then
    local src pair
    src=$(cd "$dir" && go mod download "$module" && go list -m -f '{{.Dir}}' "$module")
    build_dir="$out.partial/src"
    mkdir -p "$build_dir"
    cp -r "$src" "$build_dir/module"
    chmod -R u+w "$build_dir/module"
    cp "$dir/go.mod" "$dir/go.sum" "$build_dir/"
    for pair in $overlay; do cp "$dir/${pair#*=}" "$build_dir/module/${pair%%=*}"; done
    (cd "$build_dir" && go mod edit -replace "$module=./module")
  fi
  (cd "$build_dir" && go build -trimpath -ldflags "$ldflags" -o "$out.partial/bin/$name" "$module${main:+/$main}")
  local also_pair
  for also_pair in $also; do
    (cd "$build_dir" && go build -trimpath -ldflags "$ldflags" -o "$out.partial/bin/${also_pair%%=*}" "$module/${also_pair#*=}")
  done
  [ "$build_dir" = "$dir" ] || rm -rf "$build_dir"
  log "built $name in $(( $(date +%s) - start ))s"
  if declare -F after_build >/dev/null; then
    # Extra files come from the module source the build just used (read-only in the module cache).
    after_build "$(cd "$dir" && go list -m -f '{{.Dir}}' "$module")" "$out.partial"
  fi
  chmod -R u+w "$out.partial"
  rm -rf "$out"
  mv "$out.partial" "$out"
  echo "$bin"
}
