#!/usr/bin/env bash
# Builds the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kwok, and kfop's own pod-reaper) from their Go modules into a cache directory outside the
# repository, keyed by versions; pod-reaper is rebuilt when its source changes. Prints the bin
# directory on stdout as its last line. A warm cache returns at once.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Versions are read from the wrapper go.mod files so there is one place to bump them.
k8s_version=$(awk '$1=="k8s.io/kubernetes"{print $2}' "$here/k8s/go.mod")
etcd_version=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2}' "$here/etcd/go.mod")
kwok_version=$(awk '$1=="sigs.k8s.io/kwok"{print $2}' "$here/kwok/go.mod")
key="k8s-${k8s_version}_etcd-${etcd_version}_kwok-${kwok_version}"
cache_root=${KFOP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kfop}
bin="$cache_root/controlplane/$key/bin"

components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok pod-reaper)
# pod-reaper is ours and has no release version: its source checksum stands in for one.
reaper_sum=$(cd "$here/pod-reaper" && cat main.go sync.go go.mod go.sum | sha256sum | cut -c1-16)
missing=()
for c in "${components[@]}"; do [ -x "$bin/$c" ] || missing+=("$c"); done
if [ -x "$bin/pod-reaper" ] && [ "$(cat "$bin/pod-reaper.sum" 2>/dev/null)" != "$reaper_sum" ]; then
  missing+=(pod-reaper)
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || { echo "build.sh: Go is not installed; install Go 1.26 or later first (the control plane's go.mod asks for 1.26)" >&2; exit 1; }
mkdir -p "$bin.partial"
log() { printf '[control-plane] %s\n' "$*" >&2; }
log "cold build of ${missing[*]} into $bin (k8s ${k8s_version}, etcd ${etcd_version}, kwok ${kwok_version})"
log "this takes 10-25 minutes on 2 cores the first time (pod-reaper alone: 1-2); later runs reuse the cache"
export CGO_ENABLED=0 GOFLAGS=-buildvcs=false

build_k8s() {
  local minor=${k8s_version#v1.}; minor=${minor%%.*}
  local ld="-s -w"
  for kv in "gitVersion=${k8s_version}" gitMajor=1 "gitMinor=${minor}" gitTreeState=clean; do
    ld="$ld -X k8s.io/component-base/version.$kv -X k8s.io/client-go/pkg/version.$kv"
  done
  (cd "$here/k8s" && go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$ld" -o "$bin.partial/" "k8s.io/kubernetes/cmd/$1")
}

step=0
for c in "${missing[@]}"; do
  start=$(date +%s)
  step=$((step + 1))
  # testenv's Assets::locate_or_build reads "building <component> (<step>/<steps>)" for its
  # progress bar.
  log "building $c ($step/${#missing[@]}) ..."
  case "$c" in
    etcd) (cd "$here/etcd" && go build -trimpath \
            -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=${etcd_version}" \
            -o "$bin.partial/etcd" go.etcd.io/etcd/server/v3) ;;
    kwok) (cd "$here/kwok" && go build -trimpath -ldflags "-s -w" -o "$bin.partial/kwok" sigs.k8s.io/kwok/cmd/kwok) ;;
    pod-reaper) (cd "$here/pod-reaper" && go build -trimpath -ldflags "-s -w" -o "$bin.partial/pod-reaper" .) ;;
    *) build_k8s "$c" ;;
  esac
  log "built $c in $(( $(date +%s) - start ))s"
done

mkdir -p "$bin"
for c in "${missing[@]}"; do mv -f "$bin.partial/$c" "$bin/$c"; done
echo "$reaper_sum" > "$bin/pod-reaper.sum"
rmdir "$bin.partial" 2>/dev/null || true
echo "$bin"
