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
