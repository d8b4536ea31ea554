#!/bin/sh
# Refresh the vendored MCP Apps view SDK (@modelcontextprotocol/ext-apps, MIT) from npm:
# its self-contained browser bundle dist/src/app-with-deps.js and its LICENSE go to
# maya_tools/static/ext-apps/, which maya_tools/app_card.py inlines into the card view.
# Usage: scripts/refresh_ext_apps.sh [version]   (default: the latest on npm)
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
dest="$here/maya_tools/static/ext-apps"
version=${1:-$(npm view @modelcontextprotocol/ext-apps version)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@modelcontextprotocol/ext-apps@$version" >/dev/null && tar xzf ./*.tgz)
test -f "$tmp/package/dist/src/app-with-deps.js" || { echo "no dist/src/app-with-deps.js in $version" >&2; exit 1; }
mkdir -p "$dest"
cp "$tmp/package/dist/src/app-with-deps.js" "$dest/app-with-deps.js"
cp "$tmp/package/LICENSE" "$dest/LICENSE"
echo "$version" > "$dest/VERSION"
echo "ext-apps $version vendored in $dest"
