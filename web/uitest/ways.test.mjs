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

test('costWords never shows $0 for a price nobody knows', async () => {
  const { costWords } = await import('../ui/waysrules.js');
  assert.equal(costWords(null, false), 'cost unknown');
  assert.equal(costWords(0, false), 'cost unknown'); // a running Attempt on an unpriced model
  assert.equal(costWords(0.002, false), '≥ $0.0020');
  assert.equal(costWords(0, true), '$0.0000');
  assert.equal(costWords(0.031, true), '$0.0310');
});

test('savedWords says why a saving is unknown', async () => {
  const { savedWords } = await import('../ui/waysrules.js');
  assert.equal(savedWords({ saved: 0.038, lanes: [] }), '$0.0380');
  assert.match(savedWords({ saved: null, baseline_cost_known: false, baseline_model: 'm9', lanes: [] }), /baseline model m9 has no price/);
  assert.match(savedWords({ saved: null, baseline_cost_known: true, lanes: [{ model: 'm2', actual_cost_known: false }] }), /m2 has no price/);
});

test('keepWords says what happened, not the phase name', async () => {
  const { keepWords } = await import('../ui/waysrules.js');
  const w = keepWords({ index: 1, phase: 'transcript_recorded' });
  assert.match(w, /Attempt 1's changes are in your working tree, uncommitted/);
  assert.doesNotMatch(w, /transcript_recorded/);
});
