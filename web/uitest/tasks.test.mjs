// The terminal dock's task states in words (ui/taskrules.js): a detached
// task says so and offers Kill, and is never "exited (code -1)".

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DETACHED_TEXT, detachedText, endedReason, killable, taskState } from '../ui/taskrules.js';

const daemonReason = 'detached: the daemon restarted; the process may still be running in the sandbox, but its output and terminal no longer reach Lathe; kill it to end it';

test('a detached task says so, in the words its error gives', () => {
  const t = { status: 'detached', exit_code: -1, error: daemonReason };
  assert.deepEqual(taskState(t), { kind: 'detached', text: 'detached' });
  assert.equal(detachedText(t), daemonReason);
  assert.equal(endedReason(t), daemonReason);
  assert.ok(!/exited|code -1/.test(endedReason(t)));
});

test('a detached task without a reason still says it is detached', () => {
  assert.equal(detachedText({ status: 'detached', exit_code: null }), DETACHED_TEXT);
  assert.equal(detachedText({ status: 'detached', error: 'something else' }), DETACHED_TEXT);
  assert.match(DETACHED_TEXT, /^detached: the daemon restarted; the process may still be running/);
});

test('only a detached task offers Kill', () => {
  assert.equal(killable({ status: 'detached' }), true);
  assert.equal(killable({ status: 'running' }), false);
  assert.equal(killable({ status: 'exited', exit_code: 0 }), false);
});

test('running and exited tasks keep their badges', () => {
  assert.deepEqual(taskState({ status: 'running' }), { kind: 'running', text: 'running' });
  assert.deepEqual(taskState({ status: 'exited', exit_code: 0, duration_ms: 1500 }), { kind: 'ok', text: 'exit 0 in 1.5 s' });
  assert.deepEqual(taskState({ status: 'exited', exit_code: 3 }), { kind: 'failed', text: 'exit 3' });
  assert.equal(endedReason({ status: 'exited', exit_code: 2 }), 'process exited (code 2)');
  assert.equal(endedReason({ status: 'exited', exit_code: null }), 'the terminal is gone');
});
