// Review that talks back: the pure rules (ui/reviewrules.js).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { reviewInput, reviewRef, selectedLines, trayWords } from '../ui/reviewrules.js';
import { renderInput } from '../ui/store.js';

const rows = [
  { kind: 'hunk', a: null, b: null, text: '@@ -1,3 +1,3 @@' },
  { kind: 'ctx', a: 1, b: 1, text: 'one' },
  { kind: 'del', a: 2, b: null, text: 'two' },
  { kind: 'add', a: null, b: 2, text: 'TWO' },
  { kind: 'ctx', a: 3, b: 3, text: 'three' },
];

test('a selection of diff rows is a range of new lines with the quoted code', () => {
  assert.deepEqual(selectedLines(rows, 3, 1), { start: 1, end: 2, side: 'b', code: 'one\ntwo\nTWO' });
  assert.deepEqual(selectedLines(rows, 2, 2), { start: 2, end: 2, side: 'a', code: 'two' });
  assert.equal(selectedLines(rows, 0, 0), null);
});

test('comments become context references the turn spells out', () => {
  const refs = [
    reviewRef({ path: 'a.txt', start: 2, end: 2, code: 'TWO', note: 'lower case, please', source: 'turn' }),
    reviewRef({ path: 'b.txt', start: 5, end: 7, code: 'x', note: 'why?', source: 'ways' }),
  ];
  assert.equal(trayWords([{ path: 'a.txt' }, { path: 'a.txt' }, { path: 'b.txt' }]), '3 comments on 2 files');
  assert.match(reviewInput(refs[0]), /^Review comment on a\.txt \(line 2\):\n```\nTWO\n```\nlower case, please$/);
  const input = renderInput('Please address these review comments.', refs);
  assert.match(input, /a\.txt \(line 2\)/);
  assert.match(input, /b\.txt \(lines 5-7\)[\s\S]*why\?/);
});
