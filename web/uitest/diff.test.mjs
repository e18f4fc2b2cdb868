// The one diff view's pure rules (ui/diffrules.js).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { diffCounts, rowsOfParts, rowsOfPatch, splitRows } from '../ui/diffrules.js';

test('rowsOfParts numbers each side of a line diff', () => {
  const rows = rowsOfParts([{ value: 'a\n' }, { value: 'b\n', removed: true }, { value: 'B\nB2\n', added: true }, { value: 'c\n' }]);
  assert.deepEqual(rows.map((r) => [r.kind, r.a, r.b, r.text]), [
    ['ctx', 1, 1, 'a'], ['del', 2, null, 'b'], ['add', null, 2, 'B'], ['add', null, 3, 'B2'], ['ctx', 3, 4, 'c'],
  ]);
  assert.deepEqual(diffCounts(rows), { add: 2, del: 1 });
});

test('rowsOfPatch reads a unified diff, headers left out', () => {
  const rows = rowsOfPatch('diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -3,2 +3,2 @@\n keep\n-old\n+new\n');
  assert.deepEqual(rows.map((r) => [r.kind, r.a, r.b, r.text]), [
    ['hunk', null, null, '@@ -3,2 +3,2 @@'], ['ctx', 3, 3, 'keep'], ['del', 4, null, 'old'], ['add', null, 4, 'new'],
  ]);
});

test('splitRows puts a deletion beside the addition that replaced it', () => {
  const pairs = splitRows(rowsOfParts([{ value: 'x\n', removed: true }, { value: 'y\nz\n', added: true }, { value: 'k\n' }]));
  assert.deepEqual(pairs.map((p) => [p.left?.text ?? null, p.right?.text ?? null]), [['x', 'y'], [null, 'z'], ['k', 'k']]);
});
