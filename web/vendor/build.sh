#!/usr/bin/env bash
# Rebuilds the vendored front-end bundles under web/vendor/dist from the
# exact versions in package-lock.json: minified ES modules (esbuild, code
# splitting so each CodeMirror language is a chunk loaded on demand),
# xterm.js's stylesheet, and the licences of everything bundled. The
# result is committed; `go build` and `make run` never need npm.
#
#   web/vendor/build.sh        (needs node and npm; installs with npm ci)
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --ignore-scripts >/dev/null
rm -rf dist
node node_modules/esbuild/bin/esbuild src/lit.js src/codemirror.js src/xterm.js src/markdown.js \
	--bundle --splitting --format=esm --minify --target=es2022 \
	--legal-comments=none --charset=utf8 --chunk-names='chunk-[hash]' \
	--outdir=dist --log-level=warning
cp node_modules/@xterm/xterm/css/xterm.css dist/xterm.css
# The graph editor stands alone (no chunk shared with the bundles above).
node node_modules/esbuild/bin/esbuild src/drawflow.js --bundle --format=esm --minify --target=es2022 \
	--legal-comments=none --charset=utf8 --outfile=dist/drawflow.js --log-level=warning
cp node_modules/drawflow/dist/drawflow.min.css dist/drawflow.css
# The line differ of the one diff view (ui/diffview.js) stands alone as well.
node node_modules/esbuild/bin/esbuild src/diff.js --bundle --format=esm --minify --target=es2022 \
	--legal-comments=none --charset=utf8 --outfile=dist/diff.js --log-level=warning

# Licences: one file naming every bundled package, its version and licence
# text, built from the bundles' own inputs.
node --input-type=module - <<'JS'
import fs from 'node:fs';
import path from 'node:path';
const lock = JSON.parse(fs.readFileSync('package-lock.json', 'utf8'));
const out = [];
for (const [key, meta] of Object.entries(lock.packages).sort()) {
  if (!key.startsWith('node_modules/') || key.includes('esbuild')) continue;
  const dir = key;
  const lic = fs.readdirSync(dir).find((f) => /^licen[cs]e/i.test(f));
  const text = lic ? fs.readFileSync(path.join(dir, lic), 'utf8').trim() : `License: ${meta.license}`;
  out.push(`${key.slice('node_modules/'.length)} ${meta.version} (${meta.license})\n\n${text}\n`);
}
fs.writeFileSync('dist/LICENSES.txt', out.join('\n' + '-'.repeat(72) + '\n\n'));
JS
du -cb dist/* | tail -1 | awk '{printf "web/vendor/dist: %d bytes\n", $1}'
