// The rail's virtual lists (ui/railrules.js).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { windowOf, createView, sameView } from '../ui/railrules.js';

test('only the rows in view, and the overscan either side, are rendered', () => {
  const cases = [
    // n, top, row, y, h, overscan → start, end
    { name: 'a list at the top of the view', args: [1000, 0, 26, 0, 260, 2], want: { start: 0, end: 12 } },
    { name: 'scrolled into the list', args: [1000, 100, 26, 100 + 26 * 50, 260, 2], want: { start: 48, end: 62 } },
    { name: 'a short list whole', args: [5, 0, 26, 0, 900, 10], want: { start: 0, end: 5 } },
    { name: 'a list below the view', args: [1000, 2000, 26, 0, 900, 10], want: { start: 0, end: 0 } },
    { name: 'a list above the view', args: [100, 0, 26, 10000, 900, 10], want: { start: 0, end: 0 } },
    { name: 'the end of a list', args: [100, 0, 26, 26 * 95, 900, 10], want: { start: 85, end: 100 } },
    { name: 'an empty list', args: [0, 0, 26, 0, 900, 10], want: { start: 0, end: 0 } },
  ];
  for (const c of cases) assert.deepEqual(windowOf(...c.args), c.want, c.name);
});

test('a thousand Sessions render as the rows of one screen', () => {
  const v = createView(900);
  const { start, end } = windowOf(1000, 120, v.row, v.y, v.h);
  assert.equal(start, 0);
  assert.ok(end - start < 50, `${end - start} rows`);
});

test('a measurement that moves no list by a pixel needs no render', () => {
  const a = { ...createView(900), tops: new Map([['w1', 10], ['w2', 500]]) };
  assert.ok(sameView(a, { ...a, tops: new Map([['w1', 10.4], ['w2', 500]]) }));
  assert.ok(!sameView(a, { ...a, y: 30 }), 'scrolled');
  assert.ok(!sameView(a, { ...a, tops: new Map([['w1', 10]]) }), 'a list gone');
  assert.ok(!sameView(a, { ...a, tops: new Map([['w1', 10], ['w2', 540]]) }), 'a list moved');
});

test('a worktree Session names its branch; a shared one has none', async () => {
  const { worktreeBranch } = await import('../ui/store.js');
  assert.equal(worktreeBranch({ id: 'S1', isolation: 'worktree', branch: 'lathe/S1' }), 'lathe/S1');
  assert.equal(worktreeBranch({ id: 'S2', isolation: 'worktree' }), 'lathe/S2', 'the branch the daemon names it');
  assert.equal(worktreeBranch({ id: 'S3', isolation: 'shared', branch: 'main' }), '');
  assert.equal(worktreeBranch({ id: 'S4' }), '', 'a record from before isolation');
});
