// The Files tree's Git marks: each changed path's letter and word, from the
// Source Control status (GET /git/status). Pure, for web/uitest.

const WORDS = {
  A: 'added', M: 'modified', D: 'deleted', R: 'renamed', C: 'copied', T: 'type changed', U: 'untracked', '!': 'in conflict',
};
const LETTER = { added: 'A', modified: 'M', deleted: 'D', renamed: 'R', copied: 'C', type_changed: 'T', untracked: 'U' };

/**
 * gitMarks maps each changed path to {mark, word}: a conflict first, then
 * the working-tree change, then the staged one.
 */
export function gitMarks(files) {
  const out = new Map();
  for (const f of files || []) {
    const mark = f.conflict ? '!' : LETTER[f.unstaged] || LETTER[f.staged];
    if (mark) out.set(f.path, { mark, word: WORDS[mark] });
  }
  return out;
}

/** dirChanged reports whether a folder holds a changed path. */
export function dirChanged(marks, dir) {
  if (!marks) return false;
  const prefix = dir === '.' ? '' : `${dir}/`;
  for (const p of marks.keys()) if (p.startsWith(prefix)) return true;
  return false;
}
