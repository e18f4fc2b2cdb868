// The one diff view of the workbench: Ways compares an Attempt's file with
// the snapshot, History shows a turn's changes, in the same rows: line
// numbers on both sides, additions and deletions in colour and marked + and
// −, unified or side by side (the choice remembered). Two texts are diffed
// with jsdiff (/vendor/diff.js, loaded when the first diff renders); a
// patch is read as it is. The rules are pure (ui/diffrules.js).

import { html, nothing } from '/vendor/lit.js';
import { persisted } from './util.js';
import { diffCounts, rowsOfParts, rowsOfPatch, splitRows } from './diffrules.js';
import { linesText, selectedLines } from './reviewrules.js';

const modePref = persisted('diff-mode', 'unified');
let differ = null;
let loading = null;

/** ready loads the line differ once; the view renders again when it has. */
function ready(app) {
  if (differ || loading) return;
  loading = import('/vendor/diff.js')
    .then((m) => { differ = m; })
    .catch(() => { loading = null; })
    .finally(() => changed(app));
}

const rowsCache = new WeakMap(); // a source object → its rows, computed once
const picks = new WeakMap(); // a source object → the rows picked to comment on: {from, to, writing, note}

/**
 * diffGen counts the changes of every diff view's own state (the layout,
 * picked lines, a comment being written): a view that caches its parts
 * (the transcript's guard) renders again when it moves.
 */
export let diffGen = 0;

/** changed records a change of the views' own state and renders. */
function changed(app) {
  diffGen++;
  app.update();
}

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
export function diffView(app, src, label, review = null) {
  const rows = rowsOf(app, src);
  if (!rows) return html`<p class="muted small">Comparing…</p>`;
  const mode = modePref.get(); // comments (review: {session, path, source}) are made in either layout
  const n = diffCounts(rows);
  const toggle = (m) => () => { modePref.set(m); changed(app); };
  return html`<div class="diffview" role="region" aria-label=${label} data-mode=${mode}>
    <div class="diff-bar small">
      <span class="diff-count"><span class="add-n">+${n.add}</span> <span class="del-n">−${n.del}</span></span>
      <span class="spacer"></span>
      <span role="group" aria-label="Diff layout">
        <button type="button" class="small" aria-pressed=${mode === 'unified' ? 'true' : 'false'} @click=${toggle('unified')}>Unified</button>
        <button type="button" class="small" aria-pressed=${mode === 'split' ? 'true' : 'false'} @click=${toggle('split')}>Side by side</button>
      </span>
    </div>
    ${!rows.length ? html`<p class="muted small">No line changed.</p>` : mode === 'split' ? splitTable(app, src, rows, review) : unifiedTable(app, src, rows, review)}
    ${review ? commentBar(app, src, rows, review) : nothing}
  </div>`;
}

/** pick selects a row to comment on; with Shift it extends the selection to it. */
function pick(app, src, i, extend) {
  const p = picks.get(src);
  picks.set(src, extend && p ? { ...p, to: i, writing: false } : { from: i, to: i, writing: false, note: '' });
  changed(app);
}

/** picked is the picked rows of src, [lo, hi] in rows' order, or [-1, -1]. */
function picked(src) {
  const p = picks.get(src);
  return p ? [Math.min(p.from, p.to), Math.max(p.from, p.to)] : [-1, -1];
}

/** pickCell is the button that picks row i (r) to comment on, named by its line: the same in either layout. */
function pickCell(app, src, i, r, review) {
  return html`<td class="pick"><button type="button" class="icon" aria-label="Select ${r.b != null ? `line ${r.b}` : `old line ${r.a}`} of ${review.path}"
    title="Select this line to comment on it (Shift-click extends)" @click=${(e) => pick(app, src, i, e.shiftKey)}>+</button></td>`;
}

function unifiedTable(app, src, rows, review) {
  const [lo, hi] = picked(src);
  return html`<table class="diff-table unified"><tbody>
    ${rows.map((r, i) => r.kind === 'hunk'
      ? html`<tr class="hunk"><td colspan=${review ? 4 : 3}>${r.text}</td></tr>`
      : html`<tr class="${r.kind} ${i >= lo && i <= hi ? 'sel' : ''}">${review ? pickCell(app, src, i, r, review) : nothing}<td class="ln">${r.a ?? ''}</td><td class="ln">${r.b ?? ''}</td><td class="code"><span class="mark" aria-hidden="true">${MARK[r.kind]}</span>${r.text}</td></tr>`)}
  </tbody></table>`;
}

/** commentBar offers a comment on the picked lines; the comment joins the review tray above the composer. */
function commentBar(app, src, rows, review) {
  const p = picks.get(src);
  const at = p && selectedLines(rows, p.from, p.to);
  if (!at) return nothing;
  const where = `${linesText(at.start, at.end)}${at.side === 'a' ? ' (removed)' : ''}`;
  const clear = () => { picks.delete(src); changed(app); };
  const add = () => {
    if (!p.note.trim()) return;
    app.review.add(review.session, { path: review.path, start: at.start, end: at.end, code: at.code, note: p.note.trim(), source: review.source });
    clear();
  };
  return p.writing
    ? html`<form class="comment-form" @submit=${(e) => { e.preventDefault(); add(); }}>
        <label>Comment on ${review.path}, ${where} <textarea rows="2" required .value=${p.note} autofocus
          @input=${(e) => { p.note = e.target.value; }}
          @keydown=${(e) => { if (e.key === 'Escape') { e.stopPropagation(); clear(); } }}></textarea></label>
        <div class="row"><button type="submit" class="primary">Add comment</button><button type="button" @click=${clear}>Cancel</button></div>
      </form>`
    : html`<div class="comment-bar small" role="group" aria-label="Selected lines">${review.path}, ${where} selected
        <button type="button" class="small" @click=${() => { p.writing = true; changed(app); }}>Comment…</button>
        <button type="button" class="link small" @click=${clear}>Clear</button></div>`;
}

/**
 * splitTable is the side-by-side layout. With review, a removed line is
 * picked on the left, an added or unchanged one on the right: the rows and
 * their names are the unified layout's, so a selection carries across.
 */
function splitTable(app, src, rows, review) {
  const [lo, hi] = picked(src);
  const index = review ? new Map(rows.map((r, i) => [r, i])) : null;
  const cell = (r, side) => {
    const i = r ? index?.get(r) ?? -1 : -1;
    const pickable = review && r && (side === 'left' ? r.kind === 'del' : r.kind !== 'del');
    const pickTd = review ? (pickable ? pickCell(app, src, i, r, review) : html`<td class="pick"></td>`) : nothing;
    return r
      ? html`${pickTd}<td class="ln">${side === 'left' ? r.a ?? '' : r.b ?? ''}</td><td class="code ${r.kind} ${i >= 0 && i >= lo && i <= hi ? 'sel' : ''}"><span class="mark" aria-hidden="true">${MARK[r.kind]}</span>${r.text}</td>`
      : html`${pickTd}<td class="ln"></td><td class="code none"></td>`;
  };
  return html`<table class="diff-table split"><tbody>
    ${splitRows(rows).map((p) => p.left?.kind === 'hunk'
      ? html`<tr class="hunk"><td colspan=${review ? 6 : 4}>${p.left.text}</td></tr>`
      : html`<tr>${cell(p.left, 'left')}${cell(p.right, 'right')}</tr>`)}
  </tbody></table>`;
}

