// The Ways panel's pure rules (ui/ways.js), tested in web/uitest.

/** RESOLVED are the states of a set that no longer owns its Workspace. */
export const RESOLVED = new Set(['kept', 'discarded']);

/** laneOf finds the Attempt whose run key a frame's workflow is, or -1. */
export function laneOf(results, workflow) {
  const a = (results?.attempts || []).find((x) => x.run === workflow);
  return a ? a.index : -1;
}

/** briefArgs shortens a tool call's arguments for a lane's list. */
export function briefArgs(args) {
  if (!args) return '';
  const s = typeof args === 'string' ? args : JSON.stringify(args);
  return s.length > 60 ? s.slice(0, 57) + '…' : s;
}

/** usd renders a price, or "unknown" for a price nobody knows (never $0). */
export function usd(v) {
  return v === null || v === undefined ? 'unknown' : `$${Number(v).toFixed(4)}`;
}

/**
 * laneBodies turns the form's comma-separated models into one lane per
 * Attempt (models repeat when fewer than n), or null when none is named.
 */
export function laneBodies(models, n) {
  const list = String(models || '').split(',').map((m) => m.trim()).filter(Boolean);
  if (!list.length) return null;
  return Array.from({ length: n }, (_, i) => ({ model: list[i % list.length] }));
}

/**
 * costWords renders a price that may be partial: "cost unknown" when no
 * part of it is priced (never $0.0000 for a model without a price), "≥ $x"
 * when only some of it is, else "$x".
 */
export function costWords(v, known) {
  if (v === null || v === undefined || (!known && !Number(v))) return 'cost unknown';
  return known ? usd(v) : `≥ ${usd(v)}`;
}

/** savedWords says what a set saved against its baseline, or why that is not known. */
export function savedWords(c) {
  if (c.saved !== null && c.saved !== undefined) return `${usd(c.saved)}${c.all_local ? ' (every Attempt ran on a local model)' : ''}`;
  const unpriced = (c.lanes || []).filter((l) => !l.actual_cost_known).map((l) => l.model);
  if (!c.baseline_cost_known) return `unknown: the baseline model ${c.baseline_model} has no price`;
  if (unpriced.length) return `unknown: ${[...new Set(unpriced)].join(', ')} ${unpriced.length === 1 ? 'has' : 'have'} no price`;
  return 'unknown: some usage was not reported';
}

/** keepWords says where a Keep stands, in the user's words rather than its phase name. */
export function keepWords(keep) {
  const n = `Attempt ${keep.index}`;
  switch (keep.phase) {
    case 'applying':
      return `Writing ${n}'s changes into your working tree…`;
    case 'applied':
      return `${n}'s changes are in your working tree, uncommitted; recording its turn…`;
    case 'transcript_recorded':
      return `${n}'s changes are in your working tree, uncommitted (no commit), and its turn is in the conversation`;
    default:
      return `Keeping ${n}: ${keep.phase}`;
  }
}
