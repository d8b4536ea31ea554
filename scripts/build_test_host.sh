#!/usr/bin/env bash
# Rebuild tests/browser/app-bridge.bundle.js: the MCP Apps host side (AppBridge, PostMessageTransport) of
# @modelcontextprotocol/ext-apps, at the version vendored in maya_tools/static/ext-apps/VERSION, with
# its dependencies, bundled once by esbuild into one classic script that sets globalThis.McpAppBridge.
# Needs node and npm (the npm registry); the tests only need the committed bundle.
set -euo pipefail
cd "$(dirname "$0")/.."
version="$(head -1 maya_tools/static/ext-apps/VERSION | tr -d '[:space:]')"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="$PWD/tests/browser/app-bridge.bundle.js"
cd "$work"
npm init -y >/dev/null
npm install --silent --no-audit --no-fund "@modelcontextprotocol/ext-apps@$version" esbuild@0.28.2
cat > entry.js <<'JS'
export { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
JS
./node_modules/.bin/esbuild entry.js --bundle --format=iife --global-name=McpAppBridge --platform=browser \
  --minify --legal-comments=eof \
  --banner:js="/* @modelcontextprotocol/ext-apps@$version app-bridge and its dependencies, bundled by scripts/build_test_host.sh. Licences: MIT (see maya_tools/static/ext-apps/LICENSE) and those of the dependencies in the trailing comments. */" \
  --outfile="$out"
