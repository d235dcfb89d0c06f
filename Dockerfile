# Agentry as a container: `docker build -t agentry .` (see docs/operations.md, "Containers").

# Build stage: compiles TypeScript and the native SQLite and secp256k1 modules.
FROM node:20-bookworm-slim AS build
WORKDIR /app
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json .prebuild-installrc ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
# The console's pages, built by vite with the server.
COPY web ./web
RUN npm run build && npm prune --omit=dev

# Runtime stage: the compiled program and production modules, run as an unprivileged user.
FROM node:20-bookworm-slim
ENV NODE_ENV=production \
  AGENTRY_HOST=0.0.0.0 \
  AGENTRY_PORT=8000 \
  AGENTRY_DATABASE_URL=sqlite:/data/agentry.db \
  AGENTRY_LOG_FORMAT=json
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# The Python side of hosted agents, run by the interpreter in AGENTRY_HOSTING_PYTHON.
COPY hosting ./hosting
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8000
# Liveness: /health answers while the process runs (readiness, /ready, is for balancers).
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.AGENTRY_PORT || 8000) + '/health').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# SIGTERM drains (docs/operations.md, "Stopping and draining").
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "--enable-source-maps", "dist/agentry.js"]
CMD ["serve"]
