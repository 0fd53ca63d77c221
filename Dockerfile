# Tessera's container image: `tessera` (the CLI, `tessera serve`, `tessera k8s scheduler|extender`).
#   scripts/build-image.sh [TAG]     (podman or docker; see docs/kubernetes.md, "Deploying")
#
# Build stage: Debian 12 (bookworm) with the packages scripts/install-deps.sh installs for `run` (compiler,
# CMake, Ninja and the -dev packages CMake finds; GoogleTest's too, since CMake looks for it). Node comes
# from the official node image on bookworm, not from Debian: the portal's Vite 7 needs Node ^20.19 or
# >=22.12 and bookworm has 18; install-deps.sh keeps a node that is already there. `npm ci` fetches the
# portal's packages pinned by web/package-lock.json while the image is built; nothing is fetched at run time.
ARG NODE_IMAGE=node:22-bookworm-slim
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN ./scripts/install-deps.sh run && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release \
 && cmake --build build --target tessera \
 && strip build/tessera

# Runtime stage: only the shared libraries `tessera` links (ldd of a Release build, mapped to bookworm
# packages with dpkg -S; their own dependencies come with them) and the CA bundle for outbound TLS.
# `tessera simulate report` also needs Debian's libjs-chart.js, left out here (it says so when missing).
FROM debian:bookworm-slim
RUN apt-get update -q \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libtcmalloc-minimal4 libcurl4 libsqlite3-0 libpq5 libyaml-cpp0.7 libfmt9 libcpp-httplib0.11 libssl3 \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# A numeric non-root user (runAsNonRoot can check it); the store's default directory is its own.
RUN groupadd --gid 65532 tessera \
 && useradd --uid 65532 --gid 65532 --no-create-home --home-dir /var/lib/tessera --shell /usr/sbin/nologin tessera \
 && mkdir -p /var/lib/tessera && chown 65532:65532 /var/lib/tessera
COPY --from=build /src/build/tessera /usr/local/bin/tessera
USER 65532:65532
WORKDIR /var/lib/tessera
EXPOSE 8080 8888
ENTRYPOINT ["/usr/local/bin/tessera"]
CMD ["--help"]
