// The lattice turn's rules: the plan from its frame, the Worker lifecycle
// events moving it, the Workers' states, the rounds, and the store's
// handling of plan frames, lifecycle events, snapshots and records.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as S from '../ui/store.js';
import { planOf, applyLifecycle, workers, levels, teamOf, targetOf } from '../ui/latticerules.js';

const planFrame = {
  kind: 'coordinator-plan', workflow: 'S1', turn_id: 'L1', coordinator: 'planner', goal: 'build',
  subtasks: [
    { id: 'a', title: 'A', instruction: 'do a', worker: 'w1' },
    { id: 'b', title: 'B', instruction: 'do b', depends_on: ['a'], worker: 'w2' },
    { id: 'c', title: 'C', instruction: 'do c', worker: 'w1' },
  ],
};

test('lifecycle events move subtasks and Workers', () => {
  const plan = planOf(planFrame);
  assert.deepEqual(workers(plan).map((w) => w.state), ['waiting', 'waiting']);
  applyLifecycle(plan, { type: 'AgentActivated', task: 'a' });
  assert.deepEqual(workers(plan).map((w) => w.state), ['running', 'waiting']);
  applyLifecycle(plan, { type: 'TaskCompleted', task: 'a', output: 'A done', tokens: 12 });
  applyLifecycle(plan, { type: 'AgentFailed', task: 'c', output: 'boom' });
  applyLifecycle(plan, { type: 'AgentFailed', task: 'b', name: 'skipped', output: 'skipped: a' });
  assert.equal(plan.subtasks[0].output, 'A done');
  assert.equal(plan.subtasks[0].tokens, 12);
  assert.equal(plan.subtasks[1].status, 'skipped');
  assert.equal(plan.subtasks[2].error, 'boom');
  assert.deepEqual(workers(plan).map((w) => [w.worker, w.state]), [['w1', 'failed'], ['w2', 'skipped']]);
  assert.equal(applyLifecycle(plan, { type: 'AgentActivated', task: 'zz' }), false);
});

test('rounds follow the dependencies', () => {
  assert.deepEqual(levels(planOf(planFrame)).map((r) => r.map((s) => s.id)), [['a', 'c'], ['b']]);
});

test('a lattice Session\'s team is the configured one, narrowed by mode.workers', () => {
  const team = { coordinator: 'planner', workers: ['w1', 'w2', 'w3'] };
  assert.deepEqual(teamOf(team, { mode: { kind: 'lattice' } }), ['w1', 'w2', 'w3']);
  assert.deepEqual(teamOf(team, { mode: { kind: 'lattice', workers: ['w3', 'w1'] } }), ['w1', 'w3']);
  assert.deepEqual(teamOf(null, { mode: { kind: 'lattice' } }), []);
});

test('the store: plan frame, lifecycle events, snapshot, record', () => {
  const st = S.createState();
  st.sessions.set('S1', { id: 'S1', mode: { kind: 'lattice' } });
  S.applyTurnFrame(st, { kind: 'session-accepted', session: 'S1', turn_id: 'L1' });
  S.applyTurnFrame(st, planFrame);
  S.applyEvent(st, { kind: 'event', type: 'AgentActivated', agent: 'w1', task: 'a', workflow: 'S1', turn_id: 'L1' });
  S.applyTurnFrame(st, { kind: 'token', workflow: 'S1', agent: 'w1', turn_id: 'L1', delta: 'working' });
  let t = st.turns.get('S1').turns[0];
  assert.equal(t.lattice.subtasks[0].status, 'activated');
  assert.deepEqual(t.parts.map((p) => [p.agent, p.text]), [['w1', 'working']]);
  // A journal event frame of the same type name never counts as a lifecycle notice.
  assert.equal(S.applyEvent(st, { kind: 'event', type: 'TaskCompleted', aggregate: 'session', aggregate_id: 'S1' }), 'session');

  // A reconnect: the snapshot's run carries the plan and the buffers.
  S.applySnapshot(st, { runs: [{ kind: 'session', workflow: 'S1', session: 'S1', turn_id: 'L1', coordinator: 'planner', goal: 'build',
    subtasks: [{ ...planFrame.subtasks[0], status: 'completed', output: 'A done' }, { ...planFrame.subtasks[1], status: 'activated' }],
    agents: [{ agent: 'w1', text: 'A done' }, { agent: 'w2', text: 'B so far' }], tool_calls: [] }] });
  t = st.turns.get('S1').turns[0];
  assert.deepEqual(t.lattice.subtasks.map((s) => s.status), ['completed', 'activated']);
  assert.deepEqual(t.parts.map((p) => p.text), ['A done', 'B so far']);

  // The durable record replaces it once the turn ended.
  S.finishHydrate(st, [], [{ id: 'S1', mode: { kind: 'lattice' } }]);
  S.loadTurns(st, 'S1', [{ turn_id: 'L1', status: 'done', output: 'all done', agent_id: 'planner', steps: [], tool_calls: [],
    lattice: { coordinator: 'planner', goal: 'build', subtasks: [{ ...planFrame.subtasks[0], status: 'completed', output: { $blob: { preview: 'A do…' } } }] } }]);
  t = st.turns.get('S1').turns[0];
  assert.equal(t.lattice.subtasks[0].output, 'A do…');
  assert.equal(t.status, 'done');
});

test('a targeted turn remembers its Worker', () => {
  const st = S.createState();
  const t = S.beginTurn(st, 'S1', { cmd: 'session', id: 'S1', turn_id: 'T1', input: 'x', target_agent: 'w2' });
  assert.equal(t.target, 'w2');
  assert.equal(S.normaliseTurn({ turn_id: 'T1', target_agent: 'w2', status: 'done' }).target, 'w2');
});

test('the target of the next turn', () => {
  const lattice = { mode: { kind: 'lattice' } };
  assert.equal(targetOf('', { coordinator: 'planner', workers: ['w1'] }, lattice), '');
  assert.equal(targetOf('w1', { coordinator: 'planner', workers: ['w1'] }, lattice), 'w1');
  assert.equal(targetOf('', { coordinator: '', workers: ['w1', 'w2'] }, lattice), 'w1');
  assert.equal(targetOf('w1', { coordinator: 'planner', workers: ['w1'] }, { mode: { kind: 'single_agent' } }), '');
});
