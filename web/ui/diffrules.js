// The one diff view's pure rules (ui/diffview.js): rows from a line diff
// of two texts or from a unified patch, and the pairing of a split view.
// Pure: no DOM, no network (web/uitest drives them).

/**
 * A row is one line of a diff: kind 'ctx' (in both), 'add', 'del' or
 * 'hunk' (a patch's @@ header), with its line numbers before (a) and
 * after (b), null where it has none.
 */

/** splitLines cuts a diff part's text into lines, without the empty one after a final newline. */
function splitLines(text) {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

/** rowsOfParts turns jsdiff's diffLines parts ({value, added, removed}) into rows. */
export function rowsOfParts(parts) {
  const rows = [];
  let a = 1;
  let b = 1;
  for (const p of parts || []) {
    for (const text of splitLines(p.value)) {
      if (p.added) rows.push({ kind: 'add', a: null, b: b++, text });
      else if (p.removed) rows.push({ kind: 'del', a: a++, b: null, text });
      else rows.push({ kind: 'ctx', a: a++, b: b++, text });
    }
  }
  return rows;
}

/** rowsOfPatch reads a unified diff (git diff's text) into rows; file headers are left out. */
export function rowsOfPatch(patch) {
  const rows = [];
  let a = 0;
  let b = 0;
  for (const line of splitLines(patch || '')) {
    const h = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
    if (h) {
      a = Number(h[1]);
      b = Number(h[2]);
      rows.push({ kind: 'hunk', a: null, b: null, text: line });
    } else if (/^(diff --git|index |--- |\+\+\+ |new file|deleted file|similarity|rename |old mode|new mode)/.test(line) && !rows.some((r) => r.kind === 'hunk')) {
      continue; // the file header before the first hunk
    } else if (line.startsWith('+')) rows.push({ kind: 'add', a: null, b: b++, text: line.slice(1) });
    else if (line.startsWith('-')) rows.push({ kind: 'del', a: a++, b: null, text: line.slice(1) });
    else if (line.startsWith('\\')) rows.push({ kind: 'hunk', a: null, b: null, text: line });
    else rows.push({ kind: 'ctx', a: a++, b: b++, text: line.startsWith(' ') ? line.slice(1) : line });
  }
  return rows;
}

/**
 * splitRows pairs rows for a side-by-side view: each deletion run beside
 * the addition run after it, context on both sides: [{left, right}], a
 * side null where it has no line.
 */
export function splitRows(rows) {
  const out = [];
  for (let i = 0; i < rows.length;) {
    const r = rows[i];
    if (r.kind === 'del' || r.kind === 'add') {
      const dels = [];
      const adds = [];
      while (i < rows.length && rows[i].kind === 'del') dels.push(rows[i++]);
      while (i < rows.length && rows[i].kind === 'add') adds.push(rows[i++]);
      for (let k = 0; k < Math.max(dels.length, adds.length); k++) out.push({ left: dels[k] || null, right: adds[k] || null });
      continue;
    }
    out.push({ left: r, right: r });
    i++;
  }
  return out;
}

/** diffCounts are the added and deleted lines of rows. */
export function diffCounts(rows) {
  let add = 0;
  let del = 0;
  for (const r of rows) {
    if (r.kind === 'add') add++;
    else if (r.kind === 'del') del++;
  }
  return { add, del };
}
