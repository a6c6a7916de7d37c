# lakehouse-jobs: the job-runner image.
#   docker build -t lakehouse-jobs .
#   docker run --rm lakehouse-jobs --job cdc-silver-merge --config /conf/tenant.conf --remote sc://spark:15002
# BASE_IMAGE defaults to the official Node 20 slim image; CI passes a locally built Debian base.
ARG BASE_IMAGE=node:20-bookworm-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

FROM ${BASE_IMAGE}
RUN command -v tini >/dev/null || (apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*)
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Any non-root uid works: the image writes only the status file and XCom/termination files it is given.
USER 1000:1000
# tini (PID 1) forwards SIGTERM to node, so `docker stop` interrupts the Spark operations cleanly.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/dist/cli.js"]
