// The graph's automatic layout, apart from the element so that it is
// tested without a browser (web/uitest).

/** layout places nodes without a position in columns by their depth. */
export function layout(nodes, edges) {
  const depth = new Map(nodes.map((n) => [n.id, 0]));
  for (let pass = 0; pass < nodes.length; pass++) {
    let changed = false;
    for (const e of edges) {
      if (!depth.has(e.from) || !depth.has(e.to)) continue;
      const d = depth.get(e.from) + 1;
      if (d > depth.get(e.to) && d < nodes.length + 1) {
        depth.set(e.to, d);
        changed = true;
      }
    }
    if (!changed) break;
  }
  const rows = new Map();
  return nodes.map((n) => {
    if (Number.isFinite(n.x) && Number.isFinite(n.y)) return { ...n };
    const col = depth.get(n.id);
    const row = rows.get(col) || 0;
    rows.set(col, row + 1);
    return { ...n, x: 40 + col * 240, y: 40 + row * 130 };
  });
}
