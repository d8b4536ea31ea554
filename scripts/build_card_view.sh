#!/bin/sh
# Rebuild the card view's script (maya_tools/static/card-view.js, with card-view.licenses.txt) and the
# browser tests' host bridge (tests/browser/app-bridge.bundle.js) from the npm packages that
# web/card-view/package-lock.json pins, with esbuild. tests/maya_tools/test_card_view.py fails until the
# committed files are what this makes. To move to newer packages: change the exact versions in
# web/card-view/package.json, run `npm install` there (it rewrites the lockfile), then this script.
# Usage: scripts/build_card_view.sh [--analyze]   (--analyze: the bytes each package adds to the view)
set -eu
cd "$(dirname "$0")/../web/card-view"
npm ci --no-audit --no-fund --loglevel=error
node build.mjs "$@"
