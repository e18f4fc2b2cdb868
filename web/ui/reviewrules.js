// Review that talks back: the pure rules of comments on diff lines
// (ui/review.js). A comment becomes a context reference of the next turn,
// {kind: 'review', path, start_line, end_line, text, note, source}, which
// the turn's record keeps (journaled with it) and its input spells out.
// Pure: no DOM, no network (web/uitest drives them).

/** isReviewRef reports whether a context reference is a review comment. */
export function isReviewRef(r) {
  return r?.kind === 'review';
}

/** reviewRef is a comment's context reference. */
export function reviewRef(c) {
  return { kind: 'review', path: c.path, start_line: c.start, end_line: c.end, text: c.code, note: c.note, source: c.source };
}

/** linesText is "line 4" or "lines 4-7". */
export function linesText(start, end) {
  return start === end ? `line ${start}` : `lines ${start}-${end}`;
}

/** trayWords sums a tray: "1 comment on 1 file", "3 comments on 2 files". */
export function trayWords(comments) {
  const n = comments.length;
  const files = new Set(comments.map((c) => c.path)).size;
  return `${n} comment${n === 1 ? '' : 's'} on ${files} file${files === 1 ? '' : 's'}`;
}

/** reviewInput is a review comment's block in a turn's execution input: where, the quoted code, the note. */
export function reviewInput(r) {
  const fence = String(r.text || '').includes('```') ? '````' : '```';
  return `Review comment on ${r.path} (${linesText(r.start_line, r.end_line)}):\n${fence}\n${r.text || ''}\n${fence}\n${r.note}`;
}

/** REVIEW_ASK is the message a review turn is sent with when the composer is empty. */
export const REVIEW_ASK = 'Please address these review comments.';

/**
 * selectedLines is the comment range of rows from..to (indexes into a
 * diff's rows, either order): the new side's line numbers, or the old
 * side's when the range holds only deletions, and the quoted code; null
 * when the range has no numbered line.
 */
export function selectedLines(rows, from, to) {
  const [i, j] = from <= to ? [from, to] : [to, from];
  const pick = rows.slice(i, j + 1).filter((r) => r.kind !== 'hunk');
  if (!pick.length) return null;
  const news = pick.filter((r) => r.b != null).map((r) => r.b);
  const side = news.length ? 'b' : 'a';
  const nums = news.length ? news : pick.map((r) => r.a).filter((x) => x != null);
  if (!nums.length) return null;
  return { start: Math.min(...nums), end: Math.max(...nums), side, code: pick.map((r) => r.text).join('\n') };
}
