// The History view's pure rules (ui/history.js): the audit trail grouped by
// turn, actors in words, and the scrubber's positions.

/** KINDS are the audit entry kinds the filters offer, as the daemon names them. */
export const KINDS = ['session', 'environment', 'task', 'turn', 'approval', 'attachment', 'file', 'git', 'attempt'];

/**
 * groupByTurn folds a trail (seq order) into groups: consecutive entries
 * of one turn form one group headed by the turn; the others are groups of
 * their own. A turn's entries interleaved with others' stay in seq order,
 * so a turn may head more than one group.
 */
export function groupByTurn(entries) {
  const groups = [];
  for (const e of entries) {
    const last = groups.at(-1);
    if (e.turn_id && last && last.turn === e.turn_id) last.entries.push(e);
    else groups.push({ turn: e.turn_id || null, entries: [e] });
  }
  return groups;
}

/** actorText names an actor in a chip: operator · key name, Agent, or system. */
export function actorText(actor, names = {}) {
  if (!actor) return 'unknown';
  switch (actor.kind) {
    case 'operator': {
      const name = names[actor.id];
      if (name) return `operator · ${name}`;
      return actor.id === 'loopback' ? 'operator · this machine' : `operator · ${actor.id}`;
    }
    case 'agent':
      return `Agent · ${actor.id}`;
    case 'system':
      return 'system';
    default:
      return `${actor.kind} · ${actor.id}`;
  }
}

/** kindQuery is the kind= parameter for the chosen kinds; "" when all (or none) are chosen. */
export function kindQuery(chosen) {
  const on = KINDS.filter((k) => chosen.has(k));
  return on.length === 0 || on.length === KINDS.length ? '' : on.join(',');
}

/** scrubSeq is the seq the scrubber's position i (0-based over the loaded entries) stands for. */
export function scrubSeq(entries, i) {
  if (!entries.length) return null;
  const at = Math.max(0, Math.min(entries.length - 1, Math.round(i)));
  return entries[at].seq;
}

/** shortHash shows the start and end of a hash, which is enough to compare by eye. */
export function shortHash(h) {
  return h && h.length > 16 ? `${h.slice(0, 8)}…${h.slice(-8)}` : h || '';
}

/** SPEEDS are the replay speeds offered. */
export const SPEEDS = [1, 2, 5, 10];

/**
 * replayState folds replayed frames into what a conversation shows, in
 * order: each step's reasoning and text (a replay sends them whole, one
 * frame per step), the tool calls (a start, then its result), and the
 * terminal status. It is a pure fold, so playing back at any speed shows
 * the same state at the same frame.
 */
export function replayState(frames) {
  const st = { started: false, items: [], end: null, error: '' };
  for (const { frame: f } of frames) {
    switch (f.kind) {
      case 'session-start':
        st.started = true;
        break;
      case 'token':
      case 'reasoning': {
        // Adjacent deltas of one kind are one text (the answer renders as Markdown whole).
        const last = st.items.at(-1);
        if (last && last.kind === f.kind) last.text += f.delta;
        else st.items.push({ kind: f.kind, text: f.delta });
        break;
      }
      case 'tool-call': {
        const id = `${f.call_id}#${f.occurrence}`;
        if (f.phase === 'start') st.items.push({ kind: 'call', id, name: f.name, args: f.arguments, done: false });
        else {
          const c = st.items.find((x) => x.kind === 'call' && x.id === id && !x.done);
          if (c) Object.assign(c, { done: true, result: f.result, isError: f.is_error, ms: f.duration_ms });
        }
        break;
      }
      case 'session-done':
      case 'session-cancelled':
      case 'session-error':
        st.end = f.kind;
        st.error = f.error || f.stop_reason || '';
        break;
    }
  }
  return st;
}

/** delayTo is how long to wait before frame i plays at speed, after frame i-1. */
export function delayTo(frames, i, speed) {
  if (i <= 0) return 0;
  return Math.max(0, (frames[i].offset_ms - frames[i - 1].offset_ms) / speed);
}

/** restoreNote names what a restore writes, for its confirmation. */
export function restoreNote(paths, side) {
  const what = paths.length === 1 ? paths[0] : `${paths.length} files (${paths.slice(0, 3).join(', ')}${paths.length > 3 ? ', …' : ''})`;
  return `Write ${what} back as they were ${side === 'before' ? 'before' : 'after'} this turn, as uncommitted changes? The index and HEAD stay as they are.`;
}

/**
 * generatedPath reports whether a path is what a build or a test run
 * generates (bytecode caches, dependency and build folders): Restore does
 * not pre-select those.
 */
export function generatedPath(p) {
  return /(^|\/)(__pycache__|\.pytest_cache|\.mypy_cache|node_modules|dist|build|target|\.gradle|\.next)(\/|$)/.test(p) ||
    /\.(pyc|pyo|o|obj|class)$/.test(p);
}

/**
 * turnName names a turn by the first words of its message and its time,
 * never by its ID: "“fix the flaky test…” · 14:02".
 */
export function turnName(message, time) {
  const words = String(message || '').trim().split(/\s+/).filter(Boolean);
  const head = words.slice(0, 6).join(' ');
  const text = head ? `“${head}${words.length > 6 ? '…' : ''}”` : 'A turn';
  return time ? `${text} · ${time}` : text;
}
