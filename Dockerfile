# syntax=docker/dockerfile:1
# etagere: caching, rate-limit-aware reverse proxy for the GitHub API.
#
#   docker build -t etagere:latest .
#   docker run --rm -p 8080:8080 -p 9090:9090 -e ETAGERE_TOKENS=ci-bot=<token> etagere:latest
#
# The admin listener (/healthz, /readyz, /metrics, /admin/tokens) binds 0.0.0.0 inside the
# container (ADMIN_HOST below) so that health checks and Prometheus can reach it; publish 9090 only
# where it should be reachable.

# ---- build: full install (dev dependencies included); `npm ci` runs `prepare`, which compiles to dist/
FROM node:20-slim AS build
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm ci --no-audit --no-fund

# ---- prod-deps: production dependencies only, without lifecycle scripts (no build needed here)
FROM node:20-slim AS prod-deps
WORKDIR /app
COPY package.json package-lock.json .npmrc ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# ---- runtime
FROM node:20-slim AS runtime
ENV NODE_ENV=production \
    ADMIN_HOST=0.0.0.0
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
CMD ["node", "dist/cli.js", "serve", "--config", "config/default.yaml"]
