#!/usr/bin/env bash
# Builds the kfop-operator container image with no container engine (no docker, podman or
# buildah): the binary, plus exactly the shared libraries `ldd` names at their own paths, in one
# layer on an empty base; no shell, no package manager, nothing else. The image runs as
# 65532:65532 with entrypoint /kfop-operator and works with a read-only root filesystem (the
# operator writes nothing to disk; its webhook certificates live in a Secret). The Dockerfile
# at the repository root lays out the same files for those who have an engine.
#
#   scripts/image.sh [--debug] [--out FILE]
#
#   (default)   cargo build --release --locked -p kfop-operator, then pack target/release/kfop-operator
#   --debug     pack target/debug/kfop-operator as `cargo build`/`cargo test` left it: no build,
#               so packing takes seconds (the install test packs the binary it runs)
#   --out FILE  the archive (default target/image/kfop-operator-<version>.oci.tar)
#
# The archive is an OCI image archive: an OCI image layout (oci-layout, index.json, blobs/) in
# one tar, its index naming the image kfop-operator:<version>. `podman load`, `skopeo` and
# Docker 25 or later read it; crane pushes the unpacked layout:
#
#   podman load -i ARCHIVE            # or: docker load -i ARCHIVE
#   skopeo copy oci-archive:ARCHIVE docker://REGISTRY/kfop-operator:TAG
#   mkdir layout && tar -xf ARCHIVE -C layout && crane push layout REGISTRY/kfop-operator:TAG
#   helm install kfop charts/kfop -n kfop-system --create-namespace \
#     --set image.repository=REGISTRY/kfop-operator,image.tag=TAG
#
# The image is packed by go-containerregistry's crane (testenv/tools/crane, built from its Go
# module into ~/.cache/kfop/tools on first use, which needs Go). crane edits an image's config
# only in a registry, so the script runs crane's own in-memory registry on a loopback port for
# the few seconds of the build; nothing leaves the machine. The layer is made by GNU tar with
# fixed owners, modes and times and gzip -n, so the same binary and libraries give the same layer
# (gzip -9 for a release, -1 for --debug).
# The script prints the compressed size, and the archive's path as its last line.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
umask 022

profile=release
out=
while [ $# -gt 0 ]; do
  case $1 in
    --debug) profile=debug ;;
    --out) out=${2:?image.sh: --out needs a file}; shift ;;
    --out=*) out=${1#--out=} ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# The crate's version, its repository and the target directory, from cargo itself.
read -r version source target_dir < <(
  cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
meta = json.load(sys.stdin)
pkg = next(p for p in meta["packages"] if p["name"] == "kfop-operator")
print(pkg["version"], pkg.get("repository") or "unknown", meta["target_directory"])'
)
[ -n "${target_dir:-}" ] || { echo "image.sh: cargo metadata failed" >&2; exit 1; }
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
out=${out:-$target_dir/image/kfop-operator-$version.oci.tar}

if [ "$profile" = release ]; then
  echo "image.sh: cargo build --release --locked -p kfop-operator" >&2
  cargo build --release --locked -p kfop-operator
fi
bin=$target_dir/$profile/kfop-operator
[ -x "$bin" ] || {
  echo "image.sh: no $bin; build it first (cargo build${profile/debug/} -p kfop-operator)" >&2
  exit 1
}
# The benchmark's fault hooks (kfop-runtime's `fault-injection` feature) never ship: a release
# built with `-p kfop-operator` alone leaves the feature off. A --debug pack is the test suite's
# own binary, built together with the benchmark, and carries them.
if [ "$profile" = release ] && grep -q KFOP_FAULT_ "$bin"; then
  echo "image.sh: $bin carries the fault hooks (KFOP_FAULT_*); build it with -p kfop-operator alone" >&2
  exit 1
fi

case $(uname -m) in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) arch=$(uname -m) ;;
esac

crane=$(testenv/tools/build.sh crane | tail -n 1)

tmp=$(mktemp -d)
registry_pid=
cleanup() {
  local status=$?
  # crane's own log, only when something failed.
  if [ "$status" -ne 0 ] && [ -s "$tmp/crane.log" ]; then cat "$tmp/crane.log" >&2; fi
  if [ -n "$registry_pid" ]; then kill "$registry_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# The root filesystem: the binary at / and each library ldd resolves at the same absolute path
# (the dynamic loader at the path the binary names as its interpreter).
root=$tmp/root
mkdir -p "$root"
cp "$bin" "$root/kfop-operator"
chmod 0755 "$root/kfop-operator"
deps=$(ldd "$bin") || { echo "image.sh: ldd $bin failed: $deps" >&2; exit 1; }
if grep -q 'not found' <<<"$deps"; then
  echo "image.sh: $bin needs libraries this machine lacks:" >&2
  echo "$deps" >&2
  exit 1
fi
# `name => /path (addr)` or `/path (addr)`; linux-vdso has no file.
libs=$(awk '$2 == "=>" { if ($3 ~ /^\//) print $3; next } $1 ~ /^\// { print $1 }' <<<"$deps")
for lib in $libs; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done

# The top-level entries by name (no `./` entry for the root itself).
mapfile -t top < <(cd "$root" && find . -mindepth 1 -maxdepth 1 -printf '%P\n' | sort)
tar --create --file="$tmp/layer.tar" --directory="$root" --format=gnu --sort=name \
  --numeric-owner --owner=0 --group=0 --mtime=@0 "${top[@]}"
# Best compression for the release image that is shipped; fastest for --debug, packed per test run.
if [ "$profile" = release ]; then level=9; else level=1; fi
gzip "-${level}n" "$tmp/layer.tar"
layer=$tmp/layer.tar.gz

# crane's registry, on a free loopback port it reports in its log. The log exists before the
# registry starts: the background job opens it later, and reading it first failed on a busy machine.
: >"$tmp/registry.log"
"$crane" registry serve --address 127.0.0.1:0 >>"$tmp/registry.log" 2>&1 &
registry_pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$tmp/registry.log")
  [ -n "$port" ] && break
  kill -0 "$registry_pid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$port" ] || { echo "image.sh: crane registry did not start:" >&2; cat "$tmp/registry.log" >&2; exit 1; }
staging=127.0.0.1:$port/kfop-operator:build

# One layer on the empty base (OCI media types), then the config.
"$crane" append --oci-empty-base --new_layer "$layer" --new_tag "$staging" \
  >/dev/null 2>>"$tmp/crane.log"
final=127.0.0.1:$port/kfop-operator:$version
"$crane" mutate "$staging" \
  --set-platform "linux/$arch" \
  --entrypoint /kfop-operator \
  --user 65532:65532 \
  --label "org.opencontainers.image.title=kfop-operator" \
  --label "org.opencontainers.image.description=The kfop all-in-one training operator" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.source=$source" \
  --tag "$final" >/dev/null 2>>"$tmp/crane.log"
"$crane" validate --remote "$final" >>"$tmp/crane.log" 2>&1
# The image as an OCI layout, then one tar of it.
layout=$tmp/layout
"$crane" pull --format oci "$final" "$layout" 2>>"$tmp/crane.log"
# crane names no reference in a pulled layout's index (--annotate-ref would name the loopback
# registry), so the one annotation the loaders read gets the image's own name.
python3 - "$layout/index.json" "kfop-operator:$version" <<'PY'
import json, sys
path, name = sys.argv[1], sys.argv[2]
with open(path) as f:
    index = json.load(f)
(manifest,) = index["manifests"]
manifest.setdefault("annotations", {})["org.opencontainers.image.ref.name"] = name
with open(path, "w") as f:
    json.dump(index, f, separators=(",", ":"))
PY
# Plain modes for the layout's files, whatever crane's umask gave them.
find "$layout" -type d -exec chmod 0755 {} +
find "$layout" -type f -exec chmod 0644 {} +
mkdir -p "$(dirname "$out")"
rm -f "$out"
tar --create --file="$out" --directory="$layout" --format=gnu --sort=name \
  --numeric-owner --owner=0 --group=0 --mtime=@0 oci-layout index.json blobs

layer_bytes=$(stat -c %s "$layer")
echo "image.sh: kfop-operator:$version ($profile, linux/$arch, revision $revision): 1 layer," \
  "$layer_bytes bytes compressed ($(( (layer_bytes + 524288) / 1048576 )) MiB)," \
  "$(stat -c %s "$out") bytes archive; files:" >&2
tar -tvzf "$layer" | awk '{ print "  " $3, $6 }' >&2
echo "compressed size: $layer_bytes bytes"
echo "$out"
