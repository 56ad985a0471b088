#!/usr/bin/env bash
# Rebuilds the playground's assets into pkg/api/playground/dist (committed:
# `go build` alone embeds them). Needs Node.js and npm.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
node build.mjs
