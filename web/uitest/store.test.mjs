// The workbench's state rules (ui/store.js and friends), run with node's own
// test runner by web_test.go: `node --test web/uitest/`.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as S from '../ui/store.js';
import { parseRoute, routeHash } from '../ui/router.js';

const session = (id, extra = {}) => ({
  id, workspace_id: 'w1', name: id, working_dir: '/w', status: 'open', created_at: '2026-01-01T00:00:00Z',
  mode: { kind: 'single_agent', agent_id: 'coder' },
  environment: { state: 'ready', generation: 1, image: 'img', setup_command: '', setup_approved: false, setup_reviewed: false, owner: '' },
  ...extra,
});

function hydrated(sessions = [session('s1')]) {
  const st = S.createState();
  S.applySnapshot(st, { kind: 'snapshot', seq: 10, runs: [], approvals: [], environment_transitions: [], attempt_ownerships: [] });
  S.finishHydrate(st, [{ id: 'w1', name: 'repo', path: '/w' }], sessions);
  return st;
}

test('event frames during a hydrate apply after the re-read, newest last', () => {
  const st = S.createState();
  S.applySnapshot(st, { kind: 'snapshot', seq: 5, runs: [], approvals: [], environment_transitions: [], attempt_ownerships: [] });
  // Arrives while GET /api/sessions is in flight, which answers an older record.
  S.applyEvent(st, { kind: 'event', type: 'session-renamed', seq: 6, aggregate: 'session', aggregate_id: 's1', session: session('s1', { name: 'new' }) });
  assert.equal(st.sessions.size, 0, 'buffered, not applied');
  S.finishHydrate(st, [], [session('s1', { name: 'old' })]);
  assert.equal(st.sessions.get('s1').name, 'new');
  assert.equal(st.pending, null);
});

test('a deleted record leaves with its transition and turns', () => {
  const st = hydrated();
  st.transitions.set('s1', 1);
  S.turnLog(st, 's1');
  assert.equal(S.applyEvent(st, { kind: 'event', type: 'session-deleted', seq: 11, aggregate: 'session', aggregate_id: 's1' }), 'session');
  assert.ok(!st.sessions.has('s1') && !st.transitions.has('s1') && !st.turns.has('s1'));
});

test('task events are told apart, so the dock re-reads its tasks', () => {
  const st = hydrated();
  assert.equal(S.applyEvent(st, { kind: 'event', type: 'session-task-started', seq: 11, aggregate: 'session', aggregate_id: 's1', session: session('s1') }), 'task');
  assert.equal(S.applyEvent(st, { kind: 'event', type: 'workspace-renamed', seq: 12, aggregate: 'workspace', aggregate_id: 'w1', workspace: { id: 'w1', name: 'x', path: '/w' } }), 'workspace');
  assert.equal(st.workspaces.get('w1').name, 'x');
});

test('the runtime tools suspend while an environment changes and a Ways set owns the Workspace', () => {
  const st = hydrated();
  assert.deepEqual(S.runtimeState(st, 's1'), { usable: true, suspended: false, reason: '' });
  S.applyEnvironmentFrame(st, { kind: 'session-environment-changing', session: 's1', generation: 1 });
  assert.equal(S.runtimeState(st, 's1').suspended, true);
  assert.match(S.runtimeState(st, 's1').reason, /changing/);
  S.applyEnvironmentFrame(st, { kind: 'session-environment-settled', session: 's1' });
  assert.equal(S.runtimeState(st, 's1').usable, true);

  S.applyOwnershipFrame(st, { kind: 'workspace-attempt-changing', workspace: 'w1', session: 's9', attempt_set_id: 'B' });
  assert.equal(S.runtimeState(st, 's1').suspended, true);
  S.applyOwnershipFrame(st, { kind: 'workspace-attempt-settled', workspace: 'w1', attempt_set_id: 'A' }); // an older set
  assert.equal(S.runtimeState(st, 's1').suspended, true, 'an older set does not release a newer one');
  S.applyOwnershipFrame(st, { kind: 'workspace-attempt-settled', workspace: 'w1', attempt_set_id: 'B' });
  assert.equal(S.runtimeState(st, 's1').usable, true);
});

test('every environment state has a badge in words', () => {
  for (const state of S.ENV_STATES) {
    const st = hydrated([session('s1', { environment: { ...session('s1').environment, state } })]);
    const b = S.sessionBadge(st, st.sessions.get('s1'));
    assert.equal(b.state, state);
    assert.ok(b.label.length > 2 && !b.label.includes('_'), b.label);
    const rt = S.runtimeState(st, 's1');
    assert.equal(rt.usable, state === 'ready', state);
  }
  const st = hydrated([session('s1', { status: 'closed' })]);
  assert.deepEqual(S.sessionBadge(st, st.sessions.get('s1')), { state: 'closed', label: 'Closed' });
  assert.equal(S.runtimeState(st, 's1').usable, false);
});

test('a snapshot replaces live state wholesale', () => {
  const st = hydrated();
  st.transitions.set('gone', 3);
  st.approvals.set('old', {});
  S.applySnapshot(st, { kind: 'snapshot', seq: 20, runs: [], approvals: [{ approval_id: 'a1' }], environment_transitions: [{ session: 's1', generation: 2 }], attempt_ownerships: [] });
  assert.deepEqual([...st.transitions], [['s1', 2]]);
  assert.deepEqual([...st.approvals.keys()], ['a1']);
});

test('a turn streams, and a reconnect replaces its text instead of doubling it', () => {
  const st = hydrated();
  const cmd = { cmd: 'session', id: 's1', input: 'hi', display_input: 'hi', turn_id: 't1', idempotency_key: 't1' };
  S.beginTurn(st, 's1', cmd);
  assert.deepEqual(S.unsentCommands(st), [cmd]);
  S.applyTurnFrame(st, { kind: 'session-accepted', session: 's1', turn_id: 't1' });
  assert.deepEqual(S.unsentCommands(st), []);
  S.applyTurnFrame(st, { kind: 'session-start', session: 's1', turn_id: 't1' });
  for (const d of ['Hel', 'lo']) S.applyTurnFrame(st, { kind: 'token', workflow: 's1', agent: 'coder', turn_id: 't1', delta: d });
  assert.equal(S.turnText(S.activeTurn(st, 's1')), 'Hello');

  // The hub cut this client off (1013); it reconnects, and the snapshot's run
  // holds everything streamed so far. Frames after it continue from there.
  S.applySnapshot(st, { kind: 'snapshot', seq: 30, approvals: [], environment_transitions: [], attempt_ownerships: [],
    runs: [{ workflow: 's1', session: 's1', turn_id: 't1', kind: 'session', status: 'running', agents: [{ agent: 'coder', text: 'Hello, wor', reasoning: '', status: 'running' }], tool_calls: [] }] });
  S.finishHydrate(st, [], [session('s1')]);
  const rev = S.activeTurn(st, 's1').rev;
  S.applyTurnFrame(st, { kind: 'token', workflow: 's1', agent: 'coder', turn_id: 't1', delta: 'ld' });
  const t = S.activeTurn(st, 's1');
  assert.equal(S.turnText(t), 'Hello, world');
  assert.equal(t.parts.length, 1, 'the snapshot text and the rest are one part');
  assert.ok(t.rev > rev, 'a change bumps the revision the view re-renders on');

  S.applyTurnFrame(st, { kind: 'session-done', session: 's1', turn_id: 't1', input_tokens: 10, output_tokens: 5, reasoning_tokens: 0, token_usage_known: false });
  assert.equal(S.activeTurn(st, 's1'), null);
  assert.equal(S.formatTokens(S.sessionTokens(st, 's1')), 'at least 15 tokens');
});

test('a turn that ended while offline is re-read, not left running', () => {
  const st = hydrated();
  S.beginTurn(st, 's1', { cmd: 'session', id: 's1', input: 'x', turn_id: 't2' });
  S.applyTurnFrame(st, { kind: 'session-start', session: 's1', turn_id: 't2' });
  const reread = S.applySnapshot(st, { kind: 'snapshot', seq: 40, runs: [], approvals: [], environment_transitions: [], attempt_ownerships: [] });
  assert.deepEqual(reread, ['s1']);
  assert.equal(S.turnLog(st, 's1').turns[0].status, 'stale');
  S.loadTurns(st, 's1', [{ turn_id: 't2', input: 'x', output: 'done!', status: 'done', steps: [{ step: 1, agent: 'coder', text: 'done!', tool_calls: [] }],
    tool_calls: [], usage: { input_tokens: 3, output_tokens: 4, reasoning_tokens: 0, token_usage_known: true, total_tokens: 7, cost_usd: 0.5, cost_known: false } }]);
  const [t] = S.turnLog(st, 's1').turns;
  assert.equal(t.status, 'done');
  assert.equal(S.turnText(t), 'done!');
  assert.deepEqual(t.tokens, { input: 3, output: 4, reasoning: 0, total: 7, known: true, cost: 0.5, costKnown: false });
  assert.equal(S.formatCost(S.sessionTokens(st, 's1')), 'at least $0.50');
});

test('tool calls pair start and result by call ID and occurrence', () => {
  const st = hydrated();
  S.beginTurn(st, 's1', { cmd: 'session', id: 's1', input: 'x', turn_id: 't3' });
  const f = { kind: 'tool-call', workflow: 's1', agent: 'coder', turn_id: 't3', call_id: 'c1', name: 'edit' };
  S.applyTurnFrame(st, { ...f, occurrence: 0, phase: 'start', arguments: '{"path":"a"}' });
  S.applyTurnFrame(st, { ...f, occurrence: 1, phase: 'start', arguments: '{"path":"b"}' });
  S.applyTurnFrame(st, { ...f, occurrence: 0, phase: 'result', result: 'ok', is_error: false });
  const tools = S.turnLog(st, 's1').turns[0].tools;
  assert.equal(tools.length, 2);
  assert.deepEqual(tools.map((c) => c.phase), ['result', 'start']);
  // Another Agent's call with the same provider-local ID is its own card.
  S.applyTurnFrame(st, { ...f, agent: 'reviewer', occurrence: 0, phase: 'result', result: 'boom', is_error: true });
  assert.equal(tools.length, 3);
  assert.deepEqual(tools.map((c) => c.is_error), [false, false, true]);
});

test('a durable record lays out each step: reasoning, text, then its tool calls with results', () => {
  const st = hydrated();
  S.loadTurns(st, 's1', [{
    turn_id: 'd1', input: 'raw', display_input: 'typed', status: 'done', output: 'Done.',
    steps: [
      { step: 1, agent: 'coder', text: 'Writing.', reasoning: 'plan', tool_calls: [{ call_id: 'c', occurrence: 1, name: 'write_file', arguments: { path: 'a' } }] },
      { step: 2, agent: 'coder', text: '', tool_calls: [{ call_id: 'c', occurrence: 2, name: 'shell', arguments: { command: 'ls' } }] },
      { step: 3, agent: 'coder', text: 'Done.', tool_calls: [] },
    ],
    tool_calls: [
      { agent: 'coder', call_id: 'c', occurrence: 1, name: 'write_file', arguments: { path: 'a' }, finished: true, result: 'wrote', is_error: false },
      { agent: 'coder', call_id: 'c', occurrence: 2, name: 'shell', arguments: { command: 'ls' }, finished: true, result: 'exit 1', is_error: true },
    ],
    usage: { input_tokens: 1, output_tokens: 1, reasoning_tokens: 0, token_usage_known: true, total_tokens: 2, cost_usd: 0, cost_known: true },
  }]);
  const [t] = S.turnLog(st, 's1').turns;
  assert.equal(t.display_input, 'typed');
  assert.deepEqual(t.parts.map((p) => p.kind === 'tool' ? `${p.tool.name}:${p.tool.result}:${p.tool.is_error}` : `${p.kind}:${p.text}`),
    ['reasoning:plan', 'text:Writing.', 'write_file:wrote:false', 'shell:exit 1:true', 'text:Done.']);
});

test('a first load mid-turn shows the snapshot text once, then the rest, and the record does not replace it', () => {
  const st = S.createState();
  // The snapshot comes before the Session records are read.
  S.applySnapshot(st, { kind: 'snapshot', seq: 5, approvals: [], environment_transitions: [], attempt_ownerships: [],
    runs: [{ workflow: 's1', session: 's1', turn_id: 'm1', kind: 'session', status: 'running',
      agents: [{ agent: 'coder', text: 'first half, ', reasoning: 'hmm', status: 'running' }],
      tool_calls: [{ agent: 'coder', call_id: 'w', occurrence: 1, name: 'write_file', arguments: {}, finished: true, result: 'ok' }] }] });
  S.finishHydrate(st, [], [session('s1')]);
  S.loadTurns(st, 's1', [{ turn_id: 'm1', input: 'go', status: 'running', steps: [], tool_calls: [], usage: {} }]);
  S.applyTurnFrame(st, { kind: 'token', workflow: 's1', agent: 'coder', turn_id: 'm1', delta: 'second half' });
  const t = S.activeTurn(st, 's1');
  assert.equal(t.display_input, 'go');
  assert.equal(S.turnText(t), 'first half, second half');
  assert.equal(t.tools.length, 1);
  S.applyTurnFrame(st, { kind: 'session-done', session: 's1', turn_id: 'm1', input_tokens: 1, output_tokens: 1, reasoning_tokens: 0, token_usage_known: true });
  // A record that has not caught up with the ending does not bring the turn back to life.
  S.loadTurns(st, 's1', [{ turn_id: 'm1', input: 'go', status: 'running', steps: [], tool_calls: [], usage: {} }]);
  assert.equal(S.turnLog(st, 's1').turns[0].status, 'done');
});

test('a record read before the accept committed keeps a turn already running here', () => {
  const st = hydrated();
  S.beginTurn(st, 's1', { cmd: 'session', id: 's1', input: 'think', turn_id: 'r1' });
  S.applyTurnFrame(st, { kind: 'session-accepted', session: 's1', turn_id: 'r1' });
  S.applyTurnFrame(st, { kind: 'session-start', session: 's1', turn_id: 'r1' });
  S.applyTurnFrame(st, { kind: 'token', workflow: 's1', agent: 'coder', turn_id: 'r1', delta: 'thinking' });
  S.loadTurns(st, 's1', []); // the GET /turns answer that predates the accept
  S.applyTurnFrame(st, { kind: 'token', workflow: 's1', agent: 'coder', turn_id: 'r1', delta: ' about it' });
  const log = S.turnLog(st, 's1');
  assert.equal(log.turns.length, 1);
  assert.equal(S.turnText(log.turns[0]), 'thinking about it');
  assert.equal(log.turns[0].status, 'running');
});

test('an error frame fails the turn still waiting to be accepted', () => {
  const st = hydrated();
  S.beginTurn(st, 's1', { cmd: 'session', id: 's1', input: 'x', turn_id: 't4' });
  assert.equal(S.failSending(st, 'unknown command "session"'), 's1');
  assert.equal(S.turnLog(st, 's1').turns[0].status, 'failed');
  assert.equal(S.failSending(st, 'again'), null);
});

test('stop refusals are notes, not terminal', () => {
  const st = hydrated();
  S.beginTurn(st, 's1', { cmd: 'session', id: 's1', input: 'x', turn_id: 't5' });
  S.applyTurnFrame(st, { kind: 'session-start', session: 's1', turn_id: 't5' });
  S.applyTurnFrame(st, { kind: 'session-stop-rejected', session: 's1', turn_id: 't5', error: 'finished' });
  const t = S.activeTurn(st, 's1');
  assert.equal(t.status, 'running');
  assert.match(t.notice, /finished/);
});

test('a refused prompt says no model saw it', () => {
  const t = S.normaliseTurn({ turn_id: 't6', input: 'a secret', status: 'error', error: 'blocked by hook `guard`: no', refused: true });
  assert.equal(t.status, 'error');
  assert.match(t.notice, /no model saw it/);
  assert.equal(S.normaliseTurn({ turn_id: 't7', status: 'error', error: 'boom' }).notice, '');
});

test('deep links round-trip', () => {
  for (const r of [
    { session: 'S1', tool: null, file: null },
    { session: 'S1', tool: 'files', file: 'src/a b/c#d.go' },
    { session: 'S1', tool: 'environment', file: null },
    { session: 'S1', tool: 'git', file: null },
  ]) {
    assert.deepEqual(parseRoute(routeHash(r)), r);
  }
  assert.deepEqual(parseRoute('#/'), { session: null, tool: null, file: null });
  assert.deepEqual(parseRoute('#/sessions/%E0%A4%A'), { session: '%E0%A4%A', tool: null, file: null });
});

test('context references render into the execution input', () => {
  const input = S.renderInput('fix it', [{ path: 'a.go', start_line: 3, end_line: 4, text: 'x := 1\ny := 2' }]);
  assert.equal(input, 'fix it\n\nContext from a.go (lines 3-4):\n```\nx := 1\ny := 2\n```');
  assert.match(S.renderInput('q', [{ path: 'r.md', start_line: 1, end_line: 1, text: '```js\n```' }]), /line 1\):\n````\n/);
});

test("another tab's accepted turn shows the user's message, from the frame or the snapshot", () => {
  const st = hydrated();
  S.applyTurnFrame(st, { kind: 'session-accepted', session: 's1', turn_id: 'o1', display_input: 'fix the flaky test' });
  assert.equal(S.activeTurn(st, 's1').display_input, 'fix the flaky test');

  const late = hydrated();
  S.applySnapshot(late, { kind: 'snapshot', seq: 30, approvals: [], environment_transitions: [], attempt_ownerships: [],
    runs: [{ workflow: 's1', session: 's1', turn_id: 'o1', display_input: 'fix the flaky test', kind: 'session', status: 'running', agents: [], tool_calls: [] }] });
  S.finishHydrate(late, [], [session('s1')]);
  assert.equal(S.activeTurn(late, 's1').display_input, 'fix the flaky test');
});

test('a Ways set holding the Workspace suspends its Sessions in one line', () => {
  const st = hydrated([session('s1'), session('s2')]);
  S.applyOwnershipFrame(st, { kind: 'workspace-attempt-changing', workspace: 'w1', session: 's1', attempt_set_id: 'SET1' });
  const own = S.waysHold(st, st.sessions.get('s2'));
  assert.equal(own.attempt_set_id, 'SET1');
  assert.match(S.runtimeState(st, 's1').reason, /^Suspended while Ways set SET1 decides/);
  assert.match(S.waysHoldWords(own, 's2'), /another Session/);
});

test('the icon rail names a Session by its initials', async () => {
  const { initials } = await import('../ui/util.js');
  assert.equal(initials('fix the flaky test'), 'FT');
  assert.equal(initials('browser'), 'BR');
  assert.equal(initials(''), '?');
});

test('the Session list in pages: the first shows at once, frames wait for the last, then apply in order', () => {
  const st = S.createState();
  S.applySnapshot(st, { kind: 'snapshot', seq: 5, runs: [], approvals: [], environment_transitions: [], attempt_ownerships: [] });
  S.startRecords(st, [{ id: 'w1', name: 'repo', path: '/w' }], [session('s1'), session('s2')]);
  assert.equal(st.sessions.size, 2, 'the first page shows');
  // While the rest is read: a rename of a Session of the first page, the delete of one of the next.
  S.applyEvent(st, { kind: 'event', type: 'session-renamed', seq: 6, aggregate: 'session', aggregate_id: 's1', session: session('s1', { name: 'new' }) });
  S.applyEvent(st, { kind: 'event', type: 'session-deleted', seq: 7, aggregate: 'session', aggregate_id: 's3' });
  assert.equal(st.sessions.get('s1').name, 's1', 'buffered, not applied');
  S.addRecords(st, [session('s3'), session('s4')]); // read before the delete
  assert.equal(st.sessions.size, 4);
  S.finishRecords(st);
  assert.equal(st.sessions.get('s1').name, 'new');
  assert.ok(!st.sessions.has('s3'), 'the delete applies after the page that still held it');
  assert.equal(st.pending, null);
  S.applyEvent(st, { kind: 'event', type: 'session-renamed', seq: 8, aggregate: 'session', aggregate_id: 's2', session: session('s2', { name: 'live' }) });
  assert.equal(st.sessions.get('s2').name, 'live', 'after the hydrate, frames apply at once');
});
