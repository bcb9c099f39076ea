#!/usr/bin/env bash
# Builds a command-line tool the tests drive (Helm, kustomize) from its Go module into the
# cache: build.sh <tool> builds the one described by the folder testenv/tools/<tool>/ (a wrapper
# go.mod pinning the module, and tool.env naming its main package and link flags) into
# ${KFOP_CACHE_DIR:-~/.cache/kfop}/tools/<name>-<version>/bin/<name>. The build itself is
# ../go-module-build.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../go-module-build.sh
. "$here/../go-module-build.sh"
go_module_build tool "$here/${1:?usage: build.sh <tool folder, e.g. helm>}" tool.env
