#!/usr/bin/env bash
# Makes sure the browser tests can run: Debian's Chromium at /usr/bin/chromium,
# node and npm, and the test script's node_modules (playwright-core, the A2A SDK,
# @redocly/cli for the OpenAPI lint, an MCP server; from its
# package-lock.json with npm's configured registry). Idempotent; fast when
# all is there.
#
#   LATHE_BROWSER_TESTS  the test script's folder  cmd/lathe/internal/daemon/testdata/browser
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/../runtime/sandbox/lib.sh"

dir=${LATHE_BROWSER_TESTS:-$here/../cmd/lathe/internal/daemon/testdata/browser}

apt_ensure /usr/bin/chromium chromium
apt_ensure node nodejs
apt_ensure npm npm
# Not a browser's, but a test tool's too: promtool checks the /metrics text.
apt_ensure promtool prometheus

# npm ci only when the lockfile changed since the last install.
stamp="$dir/node_modules/.lathe-lock.sha256"
want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
	log "installing the browser tests' node_modules (npm ci)"
	(cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >/dev/null)
	echo "$want" >"$stamp"
fi
