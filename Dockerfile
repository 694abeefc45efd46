# The mcpgate image (issue 27 §5): docs/deploy.md says how to build it, run it read-only and install the Helm chart.
#
#   docker build -t mcpgate:0.1.0 .
#   docker run --read-only --tmpfs /tmp -v mcpgate-data:/data -p 8080:8080 mcpgate:0.1.0
#
# The runtime writes only to /data (the SQLite store, its audit journal, the generated key files) and /tmp, runs
# as uid/gid 10001, and reads its configuration from /etc/mcpgate/config.yaml: mount your own file there, or give
# another path as the command (`… mcpgate:0.1.0 serve --config /config/gateway.yaml`).

ARG NODE_IMAGE=node:20-bookworm-slim

# ---------------------------------------------------------------------------------------------------------------
# build: compiles the TypeScript, builds better-sqlite3 from its own sources, keeps the production dependencies.
FROM ${NODE_IMAGE} AS build

# python3, make and g++ for better-sqlite3's node-gyp build; tini, copied into the runtime stage as PID 1.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ tini \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY package.json package-lock.json ./

# --ignore-scripts: the project's own postinstall (scripts/install-node22-tools.mjs) installs test tools and a
# Node 22 binary under tools/, which the image neither has nor wants; esbuild's (tsx, a dev dependency) and
# protobufjs's (prints a notice) are not needed either. The one install script the gateway needs is
# better-sqlite3's, run next on its own: built from source against this Node's headers (/usr/local/include/node),
# so nothing but npm packages is downloaded (no prebuilt binary, no header tarball).
# Of its build only the addon itself is kept (the object files and SQLite's sources are ~27 MB).
RUN npm ci --ignore-scripts --no-audit --no-fund \
 && npm_config_build_from_source=true npm_config_nodedir=/usr/local npm rebuild better-sqlite3 \
 && cd node_modules/better-sqlite3 \
 && mv build/Release/better_sqlite3.node /tmp/ \
 && rm -rf build deps \
 && mkdir -p build/Release \
 && mv /tmp/better_sqlite3.node build/Release/ \
 && cd /src \
 && node -e "new (require('better-sqlite3'))(':memory:').prepare('select 1').get()"

COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# `npm run build` is tsc -p tsconfig.build.json: dist/src/… from src/…. Then only production dependencies stay.
RUN npm run build \
 && chmod 0755 dist/src/cli/main.js \
 && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

# ---------------------------------------------------------------------------------------------------------------
# runtime: the compiled gateway, its production node_modules and a default configuration; no compiler, no npm run.
FROM ${NODE_IMAGE} AS runtime

# glibc's malloc keeps freed memory instead of handing it back and faulting it in again page by page: after a pause,
# 1 MiB result bodies otherwise cost ~20,000 page faults a second (docs/decisions/0033).
ENV NODE_ENV=production \
    HOME=/tmp \
    GLIBC_TUNABLES=glibc.malloc.trim_threshold=134217728:glibc.malloc.mmap_threshold=33554432

COPY --from=build /usr/bin/tini /usr/bin/tini
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY deploy/docker/config.yaml /etc/mcpgate/config.yaml

# `mcpgate` on the PATH for `docker exec` / `kubectl exec` (keys, audit verify, …). /data belongs to the runtime
# user, so that a new named volume mounted there is created writable for it.
RUN ln -s /app/dist/src/cli/main.js /usr/local/bin/mcpgate \
 && mkdir -p /data \
 && chown 10001:10001 /data \
 && chmod 0700 /data

USER 10001:10001
VOLUME ["/data"]
EXPOSE 8080
# The gateway drains on SIGTERM: /readyz answers 503 for gateway.limits.shutdownDelayMs while it goes on serving,
# then calls in flight get shutdownGraceMs. Give `docker stop -t` more than both together plus 10 s.
STOPSIGNAL SIGTERM

# node itself (the slim image has no curl or wget). MCPGATE_PORT is the port the default config listens on.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.MCPGATE_PORT || '8080') + '/healthz', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

# tini as PID 1 forwards SIGTERM to the gateway and reaps orphaned grandchildren of stdio servers.
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/app/dist/src/cli/main.js"]
CMD ["serve", "--config", "/etc/mcpgate/config.yaml"]
