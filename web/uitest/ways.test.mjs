// The Ways panel's pure rules (ui/waysrules.js).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { laneBodies, laneOf, usd } from '../ui/waysrules.js';

test("a lane's frames are found by their run key", () => {
  const r = { attempts: [{ index: 0, run: 'S:way0' }, { index: 1, run: 'S:way1' }] };
  assert.equal(laneOf(r, 'S:way1'), 1);
  assert.equal(laneOf(r, 'S'), -1); // the Session's own turn
  assert.equal(laneOf(null, 'S:way0'), -1);
});

test('an unknown price stays unknown, never $0', () => {
  assert.equal(usd(null), 'unknown');
  assert.equal(usd(undefined), 'unknown');
  assert.equal(usd(0), '$0.0000');
  assert.equal(usd(0.01234), '$0.0123');
});

test('per-lane models repeat over the Attempts; none names no lanes', () => {
  assert.deepEqual(laneBodies('m1, m2', 3), [{ model: 'm1' }, { model: 'm2' }, { model: 'm1' }]);
  assert.equal(laneBodies(' , ', 2), null);
  assert.equal(laneBodies('', 2), null);
});
