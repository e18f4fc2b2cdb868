// An outside agent's turn in the workbench: what ran it (its Agent, the
// name and version it reported, the model) and its plan, from the frames,
// a reconnect's snapshot and the durable record.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as S from '../ui/store.js';

const name = (id) => ({ claude: 'Claude Code', coder: 'Coder' })[id] || id;

test('ranLine names what ran a turn or lane', () => {
  for (const [ran, want] of [
    [{ agent: 'claude', model: 'claude-sonnet-4-6', name: '@zed-industries/claude-agent-acp', version: '0.23.1' }, 'Claude Code 0.23.1 · claude-sonnet-4-6'],
    [{ agent: '', model: 'm1', name: 'opencode', version: '1.18.33' }, 'opencode 1.18.33 · m1'],
    [{ agent: 'coder', model: 'm1', name: '', version: '' }, 'Coder · m1'],
    [{ agent: 'claude', model: '', name: 'x', version: '' }, 'Claude Code'],
    [null, ''],
  ]) assert.equal(S.ranLine(ran, name), want);
  // A lane's Results attempt has the same fields.
  assert.equal(S.ranLine(S.ranOf({ agent: 'claude', model: 'm1', agent_name: 'n', agent_version: '0.23.1' }), name), 'Claude Code 0.23.1 · m1');
});

test('planEntries keeps each entry, a status it does not know read as pending', () => {
  assert.deepEqual(S.planEntries([{ content: 'a', status: 'completed', priority: 'high' }, { content: 'b', status: 'weird' }, { status: 'in_progress' }]), [
    { content: 'a', status: 'completed', priority: 'high' }, { content: 'b', status: 'pending', priority: '' }, { content: '', status: 'in_progress', priority: '' }]);
  assert.deepEqual(S.planEntries(null), []);
});

test('a turn takes what ran it and its latest plan from frames, the snapshot and the record', () => {
  const st = S.createState();
  S.applyTurnFrame(st, { kind: 'session-accepted', session: 'S1', turn_id: 'T1' });
  S.applyTurnFrame(st, { kind: 'session-start', session: 'S1', turn_id: 'T1', agent: 'claude', model: 'm1', agent_name: 'n', agent_version: '0.23.1' });
  let t = st.turns.get('S1').turns[0];
  assert.deepEqual(t.ran, { agent: 'claude', model: 'm1', name: 'n', version: '0.23.1' });
  assert.equal(t.plan, null);
  S.applyTurnFrame(st, { kind: 'turn-plan', workflow: 'S1', agent: 'claude', turn_id: 'T1', entries: [{ content: 'read', status: 'in_progress' }] });
  S.applyTurnFrame(st, { kind: 'turn-plan', workflow: 'S1', agent: 'claude', turn_id: 'T1', entries: [{ content: 'read', status: 'completed' }, { content: 'write', status: 'pending' }] });
  t = st.turns.get('S1').turns[0];
  assert.deepEqual(t.plan.map((e) => [e.content, e.status]), [['read', 'completed'], ['write', 'pending']], 'the latest plan wins');

  // A reconnect: the snapshot's run has both.
  S.applySnapshot(st, { runs: [{ kind: 'session', workflow: 'S1', session: 'S1', turn_id: 'T1', agent: 'claude', model: 'm1', agent_name: 'n', agent_version: '0.23.1',
    plan: [{ content: 'read', status: 'completed' }, { content: 'write', status: 'in_progress' }], agents: [], tool_calls: [] }] });
  t = st.turns.get('S1').turns[0];
  assert.equal(t.ran.version, '0.23.1');
  assert.deepEqual(t.plan.map((e) => e.status), ['completed', 'in_progress']);

  // History: the durable record.
  const r = S.normaliseTurn({ turn_id: 'T1', status: 'done', agent_id: 'claude', model: 'm1', agent_name: 'n', agent_version: '0.23.1',
    plan: [{ content: 'read', status: 'completed', priority: 'medium' }], steps: [], tool_calls: [] });
  assert.deepEqual(r.ran, { agent: 'claude', model: 'm1', name: 'n', version: '0.23.1' });
  assert.deepEqual(r.plan, [{ content: 'read', status: 'completed', priority: 'medium' }]);
  const builtIn = S.normaliseTurn({ turn_id: 'T2', status: 'done', agent_id: 'coder', model: 'm1', steps: [], tool_calls: [] });
  assert.equal(builtIn.plan, null);
  assert.equal(builtIn.ran.name, '');
});
