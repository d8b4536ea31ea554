#!/usr/bin/env bash
# The README's test command, on a fresh machine: the system packages the tests run (installed when
# missing, as root with apt-get), then a fresh virtualenv, lint, strict types and the whole suite.
# The script's exit code is pytest's (or the first failing step's).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
# The browser tests (tests/browser) drive Debian's chromium through playwright; no browser download.
command -v chromium >/dev/null || missing+=(chromium)
# The PostgreSQL card store's tests start their own server from Debian's binaries (tests/postgres.py).
{ ls /usr/lib/postgresql/*/bin/pg_ctl || command -v pg_ctl; } >/dev/null 2>&1 || missing+=(postgresql)
# tests/backend_client/test_requests.py makes a self-signed certificate with the openssl command.
command -v openssl >/dev/null || missing+=(openssl)
# The replica tests run docs/deploy.md's HAProxy configuration in front of three servers.
command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
# npm installs the npm tools the tests run from their lockfiles (tests/node.py); the MCP conformance
# suite and the Inspector bring their own pinned Node.js (tests/conformance/package.json).
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$EUID" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "scripts/test.sh: the tests need ${missing[*]}; install them (on Debian: sudo apt-get install -y ${missing[*]}) and run it again" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m venv .venv && . .venv/bin/activate && pip install -q -e '.[dev]' && ruff check . && mypy && pytest -q -n auto
