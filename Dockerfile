# syntax=docker/dockerfile:1
# The coder-k8s image for pipelines that build with a container engine (docker buildx, podman, kaniko, buildah).
# The repository itself builds the same image without a daemon: hack/build-image.sh (see docs/install.md).
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=0.1.0 --build-arg CODER_K8S_COMMIT="$(git rev-parse HEAD)" -t REGISTRY/coder-k8s:0.1.0 .
#
# Each platform builds natively (under emulation when it is not the build machine's), so no cross toolchain is needed.

FROM docker.io/library/rust:1.95.0-bookworm AS build
ARG CODER_K8S_COMMIT=unknown
# ring compiles C for the musl target; musl-tools provides the musl C compiler wrapper.
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN target="$(uname -m)-unknown-linux-musl" \
 && rustup target add "$target" \
 && CODER_K8S_COMMIT="$CODER_K8S_COMMIT" cargo build --release --locked -p coder-k8s --target "$target" \
 && install -D -m 0755 "target/$target/release/coder-k8s" /out/coder-k8s

# A static binary needs no libc; distroless/static adds CA certificates (for HTTPS to Coder) and the nonroot user.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=0.1.0
ARG CODER_K8S_COMMIT=unknown
LABEL org.opencontainers.image.title="coder-k8s" \
      org.opencontainers.image.source="https://github.com/coder/coder-k8s" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${CODER_K8S_COMMIT}"
COPY --from=build --chown=65532:65532 /out/coder-k8s /coder-k8s
# Numeric, so the kubelet can enforce runAsNonRoot without a passwd lookup.
USER 65532:65532
ENTRYPOINT ["/coder-k8s"]
