# syntax=docker/dockerfile:1
# etagere: caching, rate-limit-aware reverse proxy for the GitHub API.
#
#   docker build -t etagere:0.1.0 .
#   docker run --rm -p 8080:8080 etagere:0.1.0                                    # no pool: anonymous
#   docker run --rm -p 127.0.0.1:8080:8080 -p 127.0.0.1:9090:9090 -e ADMIN_HOST=0.0.0.0 \
#     -e ETAGERE_TOKENS=ci-bot=<token> etagere:0.1.0 \
#     node dist/src/main/cli.js serve --config config/container.yaml                      # a pool for this machine
#
# Inside the container the proxy binds 0.0.0.0 (HOST below): the published ports decide who
# reaches it. A token pool on 0.0.0.0 refuses to start without consumer keys unless the config says
# pool.open: true (config/container.yaml does, for loopback-published ports); to serve other
# machines, turn on consumer keys instead (docs/token-pool.md).
# The admin listener stays on the container's loopback (the HEALTHCHECK reaches it there): it
# serves cached bodies and purges. To publish it, set ADMIN_HOST=0.0.0.0 and ETAGERE_ADMIN_TOKEN
# (/admin/* then needs it; /healthz, /readyz, /metrics stay open), or admin.open: true on purpose.

# ---- build: full install (dev dependencies included); `npm ci` runs `prepare`, which compiles to dist/
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build-if-stale.mjs ./scripts/
COPY src ./src
COPY fake-github ./fake-github
RUN npm ci --no-audit --no-fund

# ---- prod-deps: production dependencies only, without lifecycle scripts (no build needed here)
FROM node:20-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# ---- runtime
FROM node:20-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0
WORKDIR /app
# Files stay owned by root (read-only for the app); the process runs as the image's `node` user (uid 1000).
COPY package.json ./
COPY --from=prod-deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY config ./config
USER node
EXPOSE 8080 9090
# No curl in the slim image: node's own fetch asks the admin listener.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.ADMIN_PORT || 9090) + '/healthz', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "dist/src/main/cli.js", "serve", "--config", "config/default.yaml"]
