// The rail's virtual lists: of a Workspace's thousand Sessions only the
// rows in view (and a few either side) are in the DOM. Pure functions, so
// the tests in web/uitest run them without a browser.

/** ROW is a Session row's height in px (app.css: .session-item a). */
export const ROW = 26;

/** OVERSCAN is how many rows beyond the view each side is rendered. */
export const OVERSCAN = 10;

/**
 * windowOf returns the rows [start, end) of a list of n rows, each row px
 * high, whose first row is top px down the scroller, that show in a view
 * from y to y + h px down it, with overscan rows either side.
 */
export function windowOf(n, top, row, y, h, overscan = OVERSCAN) {
  const start = Math.max(0, Math.floor((y - top) / row) - overscan);
  const end = Math.min(n, Math.ceil((y + h - top) / row) + overscan);
  return end > start ? { start, end } : { start: 0, end: 0 };
}

/**
 * createView is the rail's view before it was measured: at the top, as high
 * as the window, each list's top guessed (guess) until measured.
 */
export function createView(height) {
  return { y: 0, h: height, row: ROW, tops: new Map(), measured: false };
}

/**
 * sameView reports whether two measurements place every list's rows alike,
 * to within a pixel, so a render after the second is not needed.
 */
export function sameView(a, b) {
  if (Math.abs(a.y - b.y) >= 1 || Math.abs(a.h - b.h) >= 1 || Math.abs(a.row - b.row) >= 1 || a.tops.size !== b.tops.size) return false;
  for (const [k, t] of a.tops) {
    const u = b.tops.get(k);
    if (u === undefined || Math.abs(t - u) >= 1) return false;
  }
  return true;
}
