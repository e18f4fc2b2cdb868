// The one diff view of the workbench: Ways compares an Attempt's file with
// the snapshot, History shows a turn's changes, in the same rows: line
// numbers on both sides, additions and deletions in colour and marked + and
// −, unified or side by side (the choice remembered). Two texts are diffed
// with jsdiff (/vendor/diff.js, loaded when the first diff renders); a
// patch is read as it is. The rules are pure (ui/diffrules.js).

import { html } from '/vendor/lit.js';
import { persisted } from './util.js';
import { diffCounts, rowsOfParts, rowsOfPatch, splitRows } from './diffrules.js';

const modePref = persisted('diff-mode', 'unified');
let differ = null;
let loading = null;

/** ready loads the line differ once; the view renders again when it has. */
function ready(app) {
  if (differ || loading) return;
  loading = import('/vendor/diff.js')
    .then((m) => { differ = m; })
    .catch(() => { loading = null; })
    .finally(() => app.update());
}

const rowsCache = new WeakMap(); // a source object → its rows, computed once

/** rowsOf is the rows of src: a patch ({diff}) as it is, {before, after} through the differ (null until it loads). */
function rowsOf(app, src) {
  let rows = rowsCache.get(src);
  if (rows) return rows;
  if (typeof src.diff === 'string') rows = rowsOfPatch(src.diff);
  else {
    ready(app);
    if (!differ) return null;
    rows = rowsOfParts(differ.diffLines(src.before ?? '', src.after ?? ''));
  }
  rowsCache.set(src, rows);
  return rows;
}

const MARK = { add: '+', del: '−', ctx: ' ', hunk: '' };

/**
 * diffView renders src ({before, after} or {diff}, a unified patch) labelled label, with a
 * unified/split toggle; src must be the same object across renders for its
 * rows to be kept.
 */
export function diffView(app, src, label) {
  const rows = rowsOf(app, src);
  if (!rows) return html`<p class="muted small">Comparing…</p>`;
  const mode = modePref.get();
  const n = diffCounts(rows);
  const toggle = (m) => () => { modePref.set(m); app.update(); };
  return html`<div class="diffview" role="region" aria-label=${label} data-mode=${mode}>
    <div class="diff-bar small">
      <span class="diff-count"><span class="add-n">+${n.add}</span> <span class="del-n">−${n.del}</span></span>
      <span class="spacer"></span>
      <span role="group" aria-label="Diff layout">
        <button type="button" class="small" aria-pressed=${mode === 'unified' ? 'true' : 'false'} @click=${toggle('unified')}>Unified</button>
        <button type="button" class="small" aria-pressed=${mode === 'split' ? 'true' : 'false'} @click=${toggle('split')}>Side by side</button>
      </span>
    </div>
    ${!rows.length ? html`<p class="muted small">No line changed.</p>` : mode === 'split' ? splitTable(rows) : unifiedTable(rows)}
  </div>`;
}

function unifiedTable(rows) {
  return html`<table class="diff-table unified"><tbody>
    ${rows.map((r) => r.kind === 'hunk'
      ? html`<tr class="hunk"><td colspan="3">${r.text}</td></tr>`
      : html`<tr class=${r.kind}><td class="ln">${r.a ?? ''}</td><td class="ln">${r.b ?? ''}</td><td class="code"><span class="mark" aria-hidden="true">${MARK[r.kind]}</span>${r.text}</td></tr>`)}
  </tbody></table>`;
}

function splitTable(rows) {
  const cell = (r, side) => (r
    ? html`<td class="ln">${side === 'left' ? r.a ?? '' : r.b ?? ''}</td><td class="code ${r.kind}"><span class="mark" aria-hidden="true">${MARK[r.kind]}</span>${r.text}</td>`
    : html`<td class="ln"></td><td class="code none"></td>`);
  return html`<table class="diff-table split"><tbody>
    ${splitRows(rows).map((p) => p.left?.kind === 'hunk'
      ? html`<tr class="hunk"><td colspan="4">${p.left.text}</td></tr>`
      : html`<tr>${cell(p.left, 'left')}${cell(p.right, 'right')}</tr>`)}
  </tbody></table>`;
}

