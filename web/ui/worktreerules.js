// Worktree Sessions in words: the New Session dialog's isolation choice
// (its default and why it may be off), Source Control's merge block (how
// far the branch is from the Workspace's, what Merge and Squash do, the
// request, a refusal) and what a forced delete removes and keeps. Pure: no
// DOM, no network (web/uitest drives it).

/** count is "1 commit", "3 commits". */
export function count(n, one, many = `${one}s`) {
  return `${Number(n || 0).toLocaleString('en-US')} ${n === 1 ? one : many}`;
}

/** sharing lists the open Sessions of a Workspace that work in its folder itself (not in a worktree of their own). */
export function sharing(sessions, workspaceId, except = '') {
  return sessions.filter((s) => s.workspace_id === workspaceId && s.id !== except && s.status !== 'closed' && s.isolation !== 'worktree');
}

/**
 * isolationChoice is the dialog's isolation: the user's choice when made,
 * else a worktree when another open Session already works in the
 * Workspace folder, else the shared folder. A worktree needs the folder to
 * be a Git repository (the project probe says), so until the probe answers
 * yes it is off, with the reason. others are the sharing Sessions.
 */
export function isolationChoice(probe, others, chosen) {
  let off = '';
  if (probe?.error) off = `Could not tell whether the Workspace folder is a Git repository (${probe.error}).`;
  else if (!probe) off = 'Checking whether the Workspace folder is a Git repository…';
  else if (!probe.is_git_repo) off = 'The Workspace folder is not a Git repository, so there is nothing to copy.';
  const value = off ? 'shared' : chosen || (others.length ? 'worktree' : 'shared');
  const names = others.map((s) => `“${s.name}”`);
  const why = !off && !chosen && others.length
    ? `${names.slice(0, 2).join(' and ')}${names.length > 2 ? ` and ${count(names.length - 2, 'other')}` : ''} already ${others.length === 1 ? 'works' : 'work'} in this folder, so this Session gets its own copy unless you choose otherwise.`
    : '';
  return { value, off, why };
}

/** aheadText is where the branch stands against the Workspace's: "3 commits ahead of main in the Workspace, 1 behind". */
export function aheadText(wt) {
  const base = wt.base_branch || 'its branch';
  if (!wt.ahead) {
    return wt.behind ? `Nothing to merge: ${count(wt.behind, 'commit')} behind ${base} in the Workspace` : `Even with ${base} in the Workspace: nothing to merge`;
  }
  const ahead = `${count(wt.ahead, 'commit')} ahead of ${base} in the Workspace`;
  return wt.behind ? `${ahead}, ${wt.behind} behind` : ahead;
}

/** mergeLabel is what a merge button does, in words: "Merge 3 commits into main", "Squash 3 commits into one on main". */
export function mergeLabel(strategy, wt, busy = false) {
  const base = wt.base_branch || 'the Workspace’s branch';
  if (busy) return strategy === 'squash' ? 'Squashing…' : 'Merging…';
  return strategy === 'squash'
    ? `Squash ${count(wt.ahead, 'commit')} into one on ${base}`
    : `Merge ${count(wt.ahead, 'commit')} into ${base}`;
}

/** mergeBody is the POST merge body: the strategy, and the message only when one is typed. */
export function mergeBody(strategy, message) {
  const body = { strategy };
  if (message && message.trim()) body.message = message.trim();
  return body;
}

/**
 * mergeBlocker says why a merge would be refused before it is sent, or ''
 * when it may go: nothing ahead, anything in the worktree not committed,
 * untracked files too (a merge takes commits only), or conflicts the
 * status foresees. The daemon has the last word.
 */
export function mergeBlocker(wt, files) {
  if (!wt.ahead) return `The branch has no commits that ${wt.base_branch || 'the Workspace’s branch'} lacks.`;
  const open = files || [];
  if (open.length) {
    return `Commit or discard the ${count(open.length, 'uncommitted change')} first (${names(open.map((f) => f.path))}): a merge takes commits only.`;
  }
  if (wt.conflicts?.length) {
    return `A merge would conflict in ${names(wt.conflicts)}, so it would be refused: bring ${wt.base_branch || 'the Workspace’s branch'} into the branch first (git merge in a terminal).`;
  }
  return '';
}

/**
 * discardFiles are the paths a forced delete of a worktree Session throws
 * away, from its Git status: every changed path, a rename's both sides.
 * The daemon deletes only when they are exactly its own list, and names
 * its list when they are not.
 */
export function discardFiles(files) {
  return [...new Set((files || []).flatMap((f) => (f.orig_path ? [f.orig_path, f.path] : [f.path])))].sort();
}

/** mergeRefusal is a refused merge in words, saying that nothing changed (a 409 changes nothing): {reason, files}. */
export function mergeRefusal(err) {
  const files = Array.isArray(err?.body?.files) ? err.body.files.map((f) => (typeof f === 'string' ? f : f.path)).filter(Boolean) : [];
  if (err?.status !== 409) return { reason: `the merge failed: ${err?.message || 'no answer'}`, files };
  const reason = /nothing (was )?changed/i.test(err.message) ? err.message : `${err.message}; nothing was changed`;
  return { reason, files };
}

/** mergedText says what a merge did: "Merged 3 commits into main as 1a2b3c4d (2 files)". */
export function mergedText(result) {
  const what = result.strategy === 'squash' ? 'Squashed' : 'Merged';
  const n = result.files?.length || 0;
  return `${what} ${count(result.ahead, 'commit')} into ${result.base} as ${String(result.commit || '').slice(0, 8)} (${count(n, 'file')})`;
}

/** FILE_STATE names a merge file's status letter in words. */
export const FILE_STATE = { A: 'added', M: 'modified', D: 'deleted', R: 'renamed' };

/**
 * deleteWords is what a forced delete of a worktree Session does to its
 * code, from its Git status when it could be read (st), in sentences:
 * the worktree folder goes, with the uncommitted files named; the branch
 * stays when it holds commits the Workspace's branch lacks.
 */
export function deleteWords(s, st) {
  const out = [];
  const wt = st?.worktree;
  const changed = (st?.files || []).map((f) => f.path);
  if (!st) out.push(`Its worktree folder ${s.working_dir} is removed, with any uncommitted changes in it.`);
  else if (changed.length) out.push(`Its worktree folder ${s.working_dir} is removed, and with it ${count(changed.length, 'uncommitted change')}, lost for good: ${names(changed)}.`);
  else out.push(`Its worktree folder ${s.working_dir} is removed; it has no uncommitted changes.`);
  if (!wt) out.push(`Its branch ${s.branch} is kept if it has commits the Workspace’s branch lacks.`);
  else if (wt.ahead) out.push(`Its branch ${s.branch} is kept: it has ${count(wt.ahead, 'commit')} that ${wt.base_branch} lacks.`);
  else out.push(`Its branch ${s.branch} has nothing ${wt.base_branch} lacks.`);
  return out;
}

/** names lists paths for a sentence, at most five and a count of the rest. */
export function names(paths) {
  const shown = paths.slice(0, 5).join(', ');
  return paths.length > 5 ? `${shown} and ${paths.length - 5} more` : shown;
}
