# The kfop-operator image, for those with a container engine (docker, podman, buildah):
#
#   docker build -t kfop-operator:0.1.0 --build-arg REVISION=$(git rev-parse HEAD) .
#
# NOT TESTED in this repository's suite: its machines have no container engine. The tested
# build is scripts/image.sh, which packs the same files with no engine (see its header); keep
# the two in step: the binary at /kfop-operator, exactly the libraries `ldd` names at their own
# paths (libc, libm, libgcc_s and the dynamic loader), nothing else (no shell), user
# 65532:65532, entrypoint /kfop-operator and the same labels. The operator writes nothing to
# disk (its webhook certificates live in a Secret), so it runs with a read-only root filesystem.
FROM rust:1.95-slim-bookworm AS build
# The image's own toolchain, not rust-toolchain.toml's components (no download in the build).
ENV RUSTUP_TOOLCHAIN=1.95.0 CARGO_INCREMENTAL=0
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p kfop-operator
# The root filesystem, laid out as scripts/image.sh does: `name => /path` or `/path` lines of
# ldd, each copied to the same absolute path (linux-vdso has no file).
RUN set -eu; \
    mkdir -p /rootfs; \
    cp target/release/kfop-operator /rootfs/kfop-operator; \
    chmod 0755 /rootfs/kfop-operator; \
    if ldd target/release/kfop-operator | grep -q 'not found'; then exit 1; fi; \
    for lib in $(ldd target/release/kfop-operator \
        | awk '$2 == "=>" { if ($3 ~ /^\//) print $3; next } $1 ~ /^\// { print $1 }'); do \
      mkdir -p "/rootfs$(dirname "$lib")"; \
      cp -L "$lib" "/rootfs$lib"; \
    done; \
    find /rootfs -type f | sort

FROM scratch
ARG VERSION=0.1.0
ARG REVISION=unknown
COPY --from=build /rootfs/ /
USER 65532:65532
ENTRYPOINT ["/kfop-operator"]
LABEL org.opencontainers.image.title="kfop-operator" \
      org.opencontainers.image.description="The kfop all-in-one training operator" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="https://example.invalid/kfop"
