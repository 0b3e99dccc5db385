# outpost's image: `docker build -t outpost:0.1.0 .` (manifests/outpost-static-pod.yaml runs it).
# Production only: the image holds the hub bundled into one file (npm run bundle: the hub and its
# runtime dependencies, no node_modules, no TypeScript, no test code) and iproute2's `ip`, with
# which the hub keeps its link-local address for pods. The demo (`npm start` with no --server or
# --kubeconfig) needs the apiserver simulator under test/, which is not in the image: give the hub
# a --kubeconfig or a --server.

# ---- build: TypeScript → dist/outpost.mjs (JavaScript is the same on every platform, so build natively) ----
FROM --platform=$BUILDPLATFORM node:22-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# dev dependencies included: esbuild does the bundling
RUN npm ci --no-audit --no-fund
# what the bundle is made of, and how (tsconfig.json: esbuild reads its compiler options)
COPY tsconfig.json ./
COPY build/bundle.mjs ./build/bundle.mjs
COPY cmd ./cmd
COPY lib ./lib
COPY filters ./filters
COPY certs ./certs
# the demo's simulator (test/) is not copied: the bundle leaves its non-literal import unresolved
RUN npm run bundle

# ---- iproute2's ip and the libraries it needs beyond glibc, from the runtime's Debian release ----
FROM debian:bookworm-slim AS iproute2
RUN apt-get update \
  && apt-get install -y --no-install-recommends iproute2 \
  && rm -rf /var/lib/apt/lists/*
COPY build/copy-ip.sh /copy-ip.sh
RUN sh /copy-ip.sh /out

# ---- runtime: Node.js 22 on Debian 12, no shell, no package manager ----
FROM gcr.io/distroless/nodejs22-debian12:nonroot
WORKDIR /app
ENV NODE_ENV=production
# /usr/sbin/ip (on PATH) and its libraries under /usr/lib/<triplet>
COPY --from=iproute2 /out/ /
# an .mjs is an ES module by its name: no package.json needed beside it
COPY --from=build /src/dist/outpost.mjs /app/outpost.mjs
# 10261 plain-HTTP proxy, 10268 HTTPS proxy, 10267 admin (/v1/healthz, /v1/readyz, /metrics, /debug/…)
EXPOSE 10261 10268 10267
# Not root by default. The static pod runs it as uid 0 (runAsUser: 0, with only the capabilities
# the manifest lists), because the node's credentials it must read, kubelet's client key and
# /etc/kubernetes/kubelet.conf, are 0600 root.
USER 65532:65532
ENTRYPOINT ["/nodejs/bin/node", "/app/outpost.mjs"]
CMD ["--help"]
