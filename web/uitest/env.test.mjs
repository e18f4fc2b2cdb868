// The environment panel's setup output (ui/envrules.js): shown when there
// is some, bounded to its end, and not twice beside a failure's evidence.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setupOutput, SETUP_OUTPUT_MAX } from '../ui/envrules.js';

test('no setup output, nothing to show', () => {
  assert.equal(setupOutput({ state: 'ready' }), null);
  assert.equal(setupOutput({ state: 'ready', setup_output: '' }), null);
  assert.equal(setupOutput(null), null);
});

test('a short output is shown whole', () => {
  assert.deepEqual(setupOutput({ state: 'ready', setup_output: 'ok\n' }), { text: 'ok\n', cut: false });
});

test('a long output keeps its end, and says it was cut', () => {
  const out = 'a'.repeat(10) + 'END';
  assert.deepEqual(setupOutput({ state: 'ready', setup_output: out }, 5), { text: 'a' + 'a' + 'END', cut: true });
  const big = 'x'.repeat(SETUP_OUTPUT_MAX + 100) + 'tail';
  const r = setupOutput({ state: 'ready', setup_output: big });
  assert.equal(r.text.length, SETUP_OUTPUT_MAX);
  assert.ok(r.text.endsWith('tail'));
  assert.equal(r.cut, true);
});

test("a failure's output is not shown twice beside its evidence", () => {
  const env = { state: 'failed', setup_output: 'boom', evidence: { output_tail: 'boom' } };
  assert.equal(setupOutput(env), null);
  assert.deepEqual(setupOutput({ ...env, evidence: { output_tail: 'other' } }), { text: 'boom', cut: false });
});

test('reasonWords says why the environment was prepared in the user words', async () => {
  const { reasonWords } = await import('../ui/envrules.js');
  const first = reasonWords({ reason: 'rebuilt: plan changed', setup_command: 'make', setup_approved: true });
  assert.equal(first, 'prepared after you approved its setup command');
  assert.equal(reasonWords({ reason: 'rebuilt: plan changed', setup_command: '' }), 'prepared again after its plan changed');
  assert.equal(reasonWords({ reason: 'rebuilt: rebuild requested' }), 'rebuilt because you asked for it');
});
