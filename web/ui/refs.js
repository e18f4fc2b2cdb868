// Context references other than editor selections: a Preview element
// picked with the picker bridge (runtime/preview/picker.js). Pure functions,
// shared by the composer (its chips) and the store (a turn's input).

/** isPreviewRef reports whether a context reference is a picked Preview element. */
export function isPreviewRef(r) {
  return r?.kind === 'preview';
}

/** previewRef builds the context reference of a picked element: the picker's fields, kind and port. */
export function previewRef(reference, port) {
  return { ...reference, kind: 'preview', port };
}

/** previewLabel is a picked element's chip text: ":8000 button#go". */
export function previewLabel(r) {
  const sel = String(r.selector || r.tag || 'element');
  const short = sel.length > 48 ? `…${sel.slice(-47)}` : sel;
  return `:${r.port} ${short}`;
}

/** previewInput is a picked element's block in a turn's execution input. */
export function previewInput(r) {
  const lines = [`Context from the Preview of port ${r.port} (${r.url}${r.title ? `, "${r.title}"` : ''}):`,
    `element <${r.tag}> at ${r.selector}`];
  if (r.text) lines.push(`text: ${r.text}`);
  const attrs = Object.entries(r.attributes || {}).map(([k, v]) => `${k}=${JSON.stringify(v)}`);
  if (attrs.length) lines.push(`attributes: ${attrs.join(' ')}`);
  if (r.bbox) lines.push(`box: ${Math.round(r.bbox.x)},${Math.round(r.bbox.y)} ${Math.round(r.bbox.width)}×${Math.round(r.bbox.height)} CSS px`);
  const src = r.source;
  if (src?.file) lines.push(`source: ${src.file}${src.line ? `:${src.line}` : ''}${src.column ? `:${src.column}` : ''}${src.component ? ` (${src.component})` : ''}`);
  return lines.join('\n');
}
