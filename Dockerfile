# outpost's image: `docker build -t outpost:0.1.0 .` (manifests/outpost-static-pod.yaml runs it).
# Production only: the image holds the compiled hub (dist/) and its runtime dependencies. The demo
# (`npm start` with no --server or --kubeconfig) needs the apiserver simulator under test/, which
# is not in the image: give the hub a --kubeconfig or a --server.

# ---- build: TypeScript → dist/ (JavaScript is the same on every platform, so build natively) ----
FROM --platform=$BUILDPLATFORM node:22-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
# the folders tsconfig.build.json compiles
COPY tsconfig.json tsconfig.build.json ./
COPY cmd ./cmd
COPY lib ./lib
COPY filters ./filters
COPY certs ./certs
# the demo's simulator (test/) is never part of the image, even if tsc were to pull it in
RUN npm run build && rm -rf dist/test

# ---- runtime dependencies, on the target platform (esbuild, under tsx, is per platform) ----
FROM node:22-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# ---- runtime: Node.js 22 on Debian 12, no shell, no package manager ----
FROM gcr.io/distroless/nodejs22-debian12:nonroot
WORKDIR /app
ENV NODE_ENV=production
# package.json carries "type": "module": without it Node would load dist/ as CommonJS
COPY --from=deps /app/package.json ./package.json
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# 10261 plain-HTTP proxy, 10268 HTTPS proxy, 10267 admin (/v1/healthz, /v1/readyz, /metrics, /debug/…)
EXPOSE 10261 10268 10267
# Not root by default. The static pod runs it as uid 0 (runAsUser: 0, every capability dropped),
# because the node's credentials it must read, kubelet's client key and /etc/kubernetes/kubelet.conf,
# are 0600 root.
USER 65532:65532
ENTRYPOINT ["/nodejs/bin/node", "dist/cmd/outpost.js"]
CMD ["--help"]
