# lakehouse-jobs: the job-runner image.
#   docker build -t lakehouse-jobs .
#   docker run --rm -v "$PWD/conf:/conf:ro" lakehouse-jobs \
#     --job cdc-silver-merge --config /conf/tenant.conf --remote sc://spark:15002
# BASE_IMAGE defaults to the official Node 20 slim image; CI passes a base built from Debian packages
# (scripts/container base). Any Debian-based image with node >= 20.19 on the PATH works. It is only
# the build stage: the image itself is FROM scratch with node, its shared libraries, CA certificates,
# tini and the bundled CLI (dist/cli.mjs), nothing else (no shell, no npm, no node_modules).
ARG BASE_IMAGE=node:20-bookworm-slim

FROM ${BASE_IMAGE} AS build
# Builds behind a TLS-intercepting proxy: pass the proxy's CA as a file mounted into the build and
# its path here (scripts/container build does that from the host's own NODE_EXTRA_CA_CERTS).
# An ARG, so it never reaches the runtime image's environment.
ARG NODE_EXTRA_CA_CERTS
# tini (PID 1) and the CA bundle, if the base lacks them (the official Node image does).
RUN set -eu; \
    if ! command -v tini >/dev/null || [ ! -f /etc/ssl/certs/ca-certificates.crt ]; then \
      apt-get update && apt-get install -y --no-install-recommends tini ca-certificates && rm -rf /var/lib/apt/lists/*; \
    fi
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json ./
COPY scripts/build.mjs ./scripts/build.mjs
COPY scripts/build ./scripts/build
# The build's training runs validate the examples to record V8's code caches (scripts/build.mjs).
COPY configs/examples ./configs/examples
COPY src ./src
# The bundle: dist/cli.mjs (a launcher) and its lazy chunks as scripts with their V8 code caches,
# made here at /app/dist with the node binary the image ships (a cache names its path and binary);
# its source maps give stack traces of our sources.
RUN node scripts/build.mjs

# The runtime root, assembled file by file: node and tini with exactly the shared libraries ldd
# names for them (and the loader), the CA bundle, a passwd/group entry for uid 1000, an empty /tmp.
RUN set -eu; \
    R=/rootfs; \
    mkdir -p "$R/usr/local/bin" "$R/etc/ssl/certs" "$R/app" "$R/tmp"; \
    chmod 1777 "$R/tmp"; \
    node_bin="$(readlink -f "$(command -v node)")"; \
    tini_bin="$(readlink -f "$(command -v tini-static || command -v tini)")"; \
    cp "$node_bin" "$R/usr/local/bin/node"; \
    cp "$tini_bin" "$R/usr/local/bin/tini"; \
    for bin in "$node_bin" "$tini_bin"; do \
      ldd "$bin" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }'; \
    done | sort -u | while read -r lib; do \
      mkdir -p "$R$(dirname "$lib")"; \
      cp -L "$lib" "$R$lib"; \
    done; \
    cp -L /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/ca-certificates.crt"; \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nlakehouse:x:1000:1000:lakehouse:/nonexistent:/sbin/nologin\n' >"$R/etc/passwd"; \
    printf 'root:x:0:\nlakehouse:x:1000:\n' >"$R/etc/group"; \
    cp -r /app/dist "$R/app/dist"; \
    rm -f "$R/app/dist/meta.json"; \
    node -e 'const p=require("/app/package.json"); process.stdout.write(JSON.stringify({name:p.name,version:p.version,type:p.type}))' >"$R/app/package.json"; \
    "$R/usr/local/bin/node" --version >/dev/null

FROM scratch AS runtime
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="lakehouse-jobs" \
      org.opencontainers.image.description="Job runner for open lakehouses: validated tenant configs in, Spark Connect plans out." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /rootfs/ /
# SSL_CERT_FILE: for --use-openssl-ca (Node otherwise trusts its own bundled roots, plus
# NODE_EXTRA_CA_CERTS when the deployment sets it).
ENV NODE_ENV=production \
    PATH=/usr/local/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
WORKDIR /app
# The image writes nothing of its own: only the status file, XCom and termination files it is given.
USER 1000:1000
# Exec form: tini is PID 1, so `docker stop` / pod deletion (SIGTERM) reaches node, which interrupts
# its Spark operations, writes a `cancelled` status and exits 143.
# node's flags are scripts/build/node-flags (why each one: there), repeated here literally (no shell
# in the image): the build above trained the V8 code caches under them, and V8 rejects a cache under
# other V8 flags. test/unit/scripts/node-flags.test.ts fails when this line and that file differ.
ENTRYPOINT ["/usr/local/bin/tini", "--", "/usr/local/bin/node", "--enable-source-maps", "--single-threaded-gc", "/app/dist/cli.mjs"]
