// The sizes the user may give the rail, the inspector and the terminal
// dock. Pure, for web/uitest.

/** CONVERSATION_MIN is the width the conversation always keeps beside the panes. */
export const CONVERSATION_MIN = 480;

/** SIZE_LIMITS are each pane's smallest and largest size in pixels. */
export const SIZE_LIMITS = {
  rail: { min: 180, max: 420 },
  insp: { min: 300, max: 1200 },
  dock: { min: 120, max: 900 },
};

/**
 * clampSize keeps a dragged size within its limits and the viewport: the
 * inspector never squeezes the conversation under CONVERSATION_MIN, and the
 * dock never takes more than 60% of the height.
 */
export function clampSize(which, px, { width, height }) {
  const lim = SIZE_LIMITS[which];
  let max = lim.max;
  if (which === 'insp') max = Math.min(max, width - CONVERSATION_MIN - 52);
  if (which === 'rail') max = Math.min(max, Math.max(lim.min, width - CONVERSATION_MIN - 300));
  if (which === 'dock') max = Math.min(max, Math.round(height * 0.6));
  return Math.round(Math.max(lim.min, Math.min(Number.isFinite(px) ? px : lim.min, Math.max(lim.min, max))));
}
