// The terminal dock's task states in words. A detached task (the daemon
// restarted while it ran) has no exit code: it is never "exited (code -1)",
// and only a kill ends it. Pure: no DOM, no network (web/uitest drives it).

/** DETACHED_TEXT is what a detached task says when the daemon gave no reason. */
export const DETACHED_TEXT = 'detached: the daemon restarted; the process may still be running';

/** detachedText is a detached task's state in words: its error, which says why, else DETACHED_TEXT. */
export function detachedText(t) {
  return t.error && /^detached\b/i.test(t.error) ? t.error : DETACHED_TEXT;
}

/**
 * taskState is a task's state for its badge: {kind: 'running' | 'detached'
 * | 'ok' | 'failed', text}.
 */
export function taskState(t) {
  if (t.status === 'running') return { kind: 'running', text: 'running' };
  if (t.status === 'detached') return { kind: 'detached', text: 'detached' };
  const dur = t.duration_ms ? ` in ${(t.duration_ms / 1000).toFixed(1)} s` : '';
  if (t.exit_code === null || t.exit_code === undefined) return { kind: 'failed', text: `ended${dur}` };
  return { kind: t.exit_code === 0 ? 'ok' : 'failed', text: `exit ${t.exit_code}${dur}` };
}

/** endedReason is why a terminal's tab ended: detached, its exit code, or gone. */
export function endedReason(t) {
  if (t.status === 'detached') return detachedText(t);
  return t.exit_code !== null && t.exit_code !== undefined ? `process exited (code ${t.exit_code})` : 'the terminal is gone';
}

/** killable reports whether the dock offers Kill for t: a detached task, which nothing else can end. */
export function killable(t) {
  return t.status === 'detached';
}
