// Preview context references (ui/refs.js): the chip's label and the block
// a turn's execution input carries for a picked element.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { previewRef, previewLabel, previewInput, isPreviewRef } from '../ui/refs.js';
import { renderInput } from '../ui/store.js';

const picked = {
  url: 'http://s-p8000.localhost:7777/', title: 'demo', selector: '#go', tag: 'button', text: 'Press me',
  attributes: { id: 'go', class: 'primary' }, bbox: { x: 8.4, y: 60, width: 70.2, height: 21 },
  viewport: { width: 600, height: 400, scroll_x: 0, scroll_y: 0, device_pixel_ratio: 1 },
  source: { file: 'src/App.jsx', line: 12, column: 5, via: 'data-lathe-source' },
};

test('a picked element keeps the picker fields and gains kind and port', () => {
  const r = previewRef(picked, 8000);
  assert.equal(r.kind, 'preview');
  assert.equal(r.port, 8000);
  assert.deepEqual({ ...r, kind: undefined, port: undefined }, { ...picked, kind: undefined, port: undefined });
  assert.ok(isPreviewRef(r));
  assert.ok(!isPreviewRef({ kind: 'editor', path: 'a' }));
});

test('labels', () => {
  for (const [ref, want] of [
    [previewRef(picked, 8000), ':8000 #go'],
    [previewRef({ ...picked, selector: '' }, 3000), ':3000 button'],
    [previewRef({ ...picked, selector: `html > body > ${'div > '.repeat(20)}span` }, 1), `:1 …${`html > body > ${'div > '.repeat(20)}span`.slice(-47)}`],
  ]) assert.equal(previewLabel(ref), want);
});

test('the turn input names the page, the element and its source', () => {
  const editor = { kind: 'editor', path: 'a.go', start_line: 2, end_line: 2, text: 'x := 1' };
  const out = renderInput('fix it', [editor, previewRef(picked, 8000)]);
  assert.equal(out, [
    'fix it', '', 'Context from a.go (line 2):', '```', 'x := 1', '```', '',
    'Context from the Preview of port 8000 (http://s-p8000.localhost:7777/, "demo"):',
    'element <button> at #go', 'text: Press me', 'attributes: id="go" class="primary"',
    'box: 8,60 70×21 CSS px', 'source: src/App.jsx:12:5',
  ].join('\n'));
  assert.equal(previewInput(previewRef({ url: 'u', selector: 's', tag: 'p', source: null }, 1)),
    'Context from the Preview of port 1 (u):\nelement <p> at s');
});
