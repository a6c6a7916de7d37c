# lakehouse-jobs: the job-runner image.
#   docker build -t lakehouse-jobs .
#   docker run --rm -v "$PWD/conf:/conf:ro" lakehouse-jobs \
#     --job cdc-silver-merge --config /conf/tenant.conf --remote sc://spark:15002
# BASE_IMAGE defaults to the official Node 20 slim image; CI passes a base built from Debian packages
# (scripts/container base). Any Debian-based image with node >= 20.19 on the PATH works.
ARG BASE_IMAGE=node:20-bookworm-slim

# Compile TypeScript (dev dependencies only live here).
FROM ${BASE_IMAGE} AS build
# Builds behind a TLS-intercepting proxy: pass the proxy's CA as a file mounted into the build and
# its path here (scripts/container build does that from the host's own NODE_EXTRA_CA_CERTS).
# An ARG, so it never reaches the runtime image's environment.
ARG NODE_EXTRA_CA_CERTS
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# Production dependencies only, installed from the lock file.
FROM ${BASE_IMAGE} AS deps
ARG NODE_EXTRA_CA_CERTS
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force

FROM ${BASE_IMAGE} AS runtime
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="lakehouse-jobs" \
      org.opencontainers.image.description="Job runner for open lakehouses: validated tenant configs in, Spark Connect plans out." \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}"
# tini as PID 1 forwards SIGTERM/SIGINT to node and reaps; uid 1000 exists as a real user
# (it is "node" in the official image, "lakehouse" in a plain Debian base).
RUN set -eu; \
    if ! command -v tini >/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*; \
    fi; \
    ln -sf "$(command -v tini)" /usr/local/bin/lakehouse-tini; \
    if ! getent passwd 1000 >/dev/null; then \
      groupadd --gid 1000 lakehouse && \
      useradd --uid 1000 --gid 1000 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin lakehouse; \
    fi
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps /app/package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The image writes nothing of its own: only the status file, XCom and termination files it is given.
USER 1000:1000
# Exec form: tini is PID 1, so `docker stop` / pod deletion (SIGTERM) reaches node, which interrupts
# its Spark operations, writes a `cancelled` status and exits 143.
ENTRYPOINT ["/usr/local/bin/lakehouse-tini", "--", "node", "/app/dist/cli.js"]
