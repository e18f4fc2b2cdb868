// MCP in the workbench: the approvals' live-state rules (ui/store.js) and
// the panel's pure rules (ui/mcprules.js).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as S from '../ui/store.js';
import * as M from '../ui/mcprules.js';
import { parseRoute, routeHash } from '../ui/router.js';

const approval = (id, extra = {}) => ({
  approval_id: id, run: 'r1', session: 's1', turn_id: 't1', agent_id: 'coder', server: 't', tool: 'echo',
  tool_display: 'mcp__t__echo', arguments_preview: '{"text":"hi"}', requested_at: '2026-01-01T00:00:01Z', ...extra,
});
const snapshot = (approvals) => ({ kind: 'snapshot', seq: 1, runs: [], approvals, environment_transitions: [], attempt_ownerships: [] });

test('a snapshot replaces the pending approvals; frames after it add and close them', () => {
  const st = S.createState();
  S.applySnapshot(st, snapshot([approval('a1'), approval('a2')]));
  assert.deepEqual([...st.approvals.keys()], ['a1', 'a2']);
  // a2 was decided while this tab was away: the next snapshot no longer has it.
  S.applySnapshot(st, snapshot([approval('a1')]));
  assert.deepEqual([...st.approvals.keys()], ['a1']);
  assert.equal(S.applyApprovalFrame(st, { kind: 'mcp-approval-required', ...approval('a3') }), '');
  assert.equal(st.approvals.get('a3').kind, undefined, 'the frame kind is not kept on the approval');
  assert.equal(st.approvals.get('a3').server, 't');
  // Resolved anywhere, however: closed here.
  for (const decision of ['allow', 'cancelled']) {
    const id = decision === 'allow' ? 'a1' : 'a3';
    assert.equal(S.applyApprovalFrame(st, { kind: 'mcp-approval-resolved', approval_id: id, decision }), '');
  }
  assert.equal(st.approvals.size, 0);
  // An approval not tied to a run (snapshot rule 5) is shown too.
  S.applySnapshot(st, snapshot([approval('a4', { run: undefined, session: undefined, turn_id: undefined })]));
  assert.deepEqual(S.approvalsOf(st).map((a) => a.approval_id), ['a4']);
  assert.deepEqual(S.approvalsOf(st, 's1'), []);
});

test('a decision sent from this tab waits for the resolution; unknown says it was decided elsewhere', () => {
  const st = S.createState();
  S.applySnapshot(st, snapshot([approval('a1'), approval('a2')]));
  S.markDecided(st, 'a1', 'allow');
  assert.equal(st.approvals.get('a1').sent, 'allow');
  S.markDecided(st, 'gone', 'deny'); // nothing to mark
  assert.equal(st.approvals.has('gone'), false);
  // A reconnect before the resolution: still pending, the mark is gone, it may be decided again.
  S.applySnapshot(st, snapshot([approval('a1'), approval('a2')]));
  assert.equal(st.approvals.get('a1').sent, undefined);
  const notice = S.applyApprovalFrame(st, { kind: 'mcp-approval-unknown', approval_id: 'a2' });
  assert.match(notice, /already decided elsewhere/);
  assert.deepEqual([...st.approvals.keys()], ['a1']);
  assert.equal(S.applyApprovalFrame(st, { kind: 'token', delta: 'x' }), '');
});

test("a turn's MCP call shows that it waits for its approval, until resolved", () => {
  const st = S.createState();
  S.applySnapshot(st, snapshot([]));
  S.finishHydrate(st, [], []);
  S.applyTurnFrame(st, { kind: 'session-start', session: 's1', turn_id: 't1' });
  S.applyTurnFrame(st, { kind: 'tool-call', session: 's1', turn_id: 't1', agent: 'coder', call_id: 'c1', name: 'mcp__t__echo', phase: 'start', arguments: '{}' });
  S.applyTurnFrame(st, { kind: 'tool-call', session: 's1', turn_id: 't1', agent: 'coder', call_id: 'c2', name: 'shell', phase: 'start', arguments: '{}' });
  const turn = st.turns.get('s1').turns[0];
  const [mcpCall, shell] = turn.tools;
  assert.equal(S.approvalFor(st, 't1', mcpCall), null);
  const rev = turn.rev;
  S.applyApprovalFrame(st, { kind: 'mcp-approval-required', ...approval('a1') });
  assert.ok(turn.rev > rev, 'the turn re-renders');
  assert.equal(S.approvalFor(st, 't1', mcpCall).approval_id, 'a1');
  assert.equal(S.approvalFor(st, 't1', shell), null);
  assert.equal(S.approvalFor(st, 't2', mcpCall), null, 'another turn');
  assert.equal(S.approvalFor(st, 't1', { ...mcpCall, agent: 'other' }), null, 'another Agent');
  const rev2 = turn.rev;
  S.applyApprovalFrame(st, { kind: 'mcp-approval-resolved', approval_id: 'a1', decision: 'allow' });
  assert.ok(turn.rev > rev2);
  assert.equal(S.approvalFor(st, 't1', mcpCall), null);
});

test('approvals list oldest first, by Session', () => {
  const st = S.createState();
  S.applySnapshot(st, snapshot([
    approval('late', { requested_at: '2026-01-01T00:00:09Z' }),
    approval('early', { requested_at: '2026-01-01T00:00:02Z', session: 's2' }),
  ]));
  assert.deepEqual(S.approvalsOf(st).map((a) => a.approval_id), ['early', 'late']);
  assert.deepEqual(S.approvalsOf(st, 's2').map((a) => a.approval_id), ['early']);
});

test('the four scopes are spelled out for a person, in the command order', () => {
  assert.deepEqual(M.SCOPES.map((s) => s.value), ['once', 'agent_tool', 'agent_server', 'any_agent_server']);
  assert.deepEqual(M.SCOPES.map((s) => s.label), [
    'only this once',
    'always for this tool, this Agent',
    'always for every tool of this server, this Agent',
    'always for this server, every Agent',
  ]);
  assert.equal(M.scopeLabel('agent_server'), 'always for every tool of this server, this Agent');
  assert.equal(M.scopeLabel('weird'), 'weird');
  const a = approval('a1');
  assert.equal(M.scopeDetail('agent_tool', a), 'echo of t, for coder');
  assert.equal(M.scopeDetail('agent_server', a), 'every tool of t, for coder');
  assert.equal(M.scopeDetail('any_agent_server', a), 'every tool of t, for every Agent');
  assert.match(M.scopeDetail('once', a), /asks again/);
});

test('saved decisions in words, and what a revoke removes', () => {
  const tool = { server: 't', agent_id: 'coder', tool: 'echo', decision: 'allow', scope: 'agent_tool' };
  const agentServer = { server: 't', agent_id: 'coder', decision: 'deny', scope: 'agent_server' };
  const anyAgent = { server: 't', decision: 'allow', scope: 'any_agent_server' };
  const other = { server: 'fs', agent_id: 'coder', tool: 'read', decision: 'allow', scope: 'agent_tool' };
  const perms = [tool, agentServer, anyAgent, other];
  assert.equal(M.permissionWords(tool), 'Allowed: tool echo of server t, for Agent coder');
  assert.equal(M.permissionWords(agentServer), 'Denied: every tool of server t, for Agent coder');
  assert.equal(M.permissionWords(anyAgent), 'Allowed: every tool of server t, for every Agent');
  assert.deepEqual(M.revokeQuery(tool), { server: 't', agent_id: 'coder', tool: 'echo' });
  assert.deepEqual(M.revokeQuery(anyAgent), { server: 't' });
  // The route revokes every decision its query matches.
  assert.deepEqual(M.revokeCovers(perms, tool), [tool]);
  assert.deepEqual(M.revokeCovers(perms, agentServer), [tool, agentServer]);
  assert.deepEqual(M.revokeCovers(perms, anyAgent), [tool, agentServer, anyAgent]);
});

test('an install request from a catalog entry and its form', () => {
  const entry = {
    slug: 'github', values: [
      { key: 'token', required: true, secret: true },
      { key: 'root', required: true, secret: false },
      { key: 'file', required: false, secret: false },
    ],
  };
  assert.deepEqual(M.installRequest(entry, {}).missing, ['token', 'root']);
  assert.deepEqual(M.installRequest(entry, { token: ' s3 ', root: '  /srv ', file: '   ' }, ' gh '), {
    body: { slug: 'github', values: { token: ' s3 ', root: '/srv' }, name: 'gh' }, missing: [],
  });
  assert.deepEqual(M.installRequest({ slug: 'fetch', values: [] }), { body: { slug: 'fetch' }, missing: [] });
});

test('server statuses as badges with a word and an icon', () => {
  assert.deepEqual(M.serverBadge('failed'), { state: 'failed', icon: '✕', label: 'Failed' });
  assert.equal(M.serverBadge('connected').label, 'Connected');
  assert.equal(M.serverBadge('connecting').state, 'preparing');
  assert.equal(M.serverBadge('disconnected').icon, '○');
  assert.equal(M.serverBadge('odd').label, 'odd');
  assert.match(M.approvalWords('always'), /each call asks/);
  assert.equal(M.approvalWords(''), M.approvalWords('always'), 'always is the default');
  assert.equal(M.approvalWords('never'), 'calls run without asking');
});

test('arguments previews: pretty JSON, long values folded, other text as it came', () => {
  assert.equal(M.previewArguments(''), '');
  assert.equal(M.previewArguments('{"text":"hi","n":[1,2]}'), '{\n  "text": "hi",\n  "n": [\n    1,\n    2\n  ]\n}');
  const long = 'x'.repeat(M.FOLD + 1500);
  const out = JSON.parse(M.previewArguments(JSON.stringify({ a: { b: [long] } })));
  assert.equal(out.a.b[0], `${'x'.repeat(M.FOLD)}… 1,500 more characters`);
  assert.equal(M.previewArguments('{"text":"cut sho'), '{"text":"cut sho');
});

test('the MCP panel deep link', () => {
  assert.deepEqual(parseRoute('#/mcp'), { session: null, tool: null, file: null, view: 'mcp' });
  assert.equal(routeHash({ view: 'mcp' }), '#/mcp');
  assert.equal(routeHash({ session: null }), '#/');
});
