// The Automations view's pure rules (ui/autorules.js): the graph drawn from
// a record, an edit of the drawing folded back, the folder tree, templates
// and the words of usage.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { autoPath, starterAutomation, graphOf, applyEdit, folderTree, nodeTemplate, usageWords } from '../ui/autorules.js';
import { layout } from '../lattice/layout.js';

test('graphOf: positions, the error on its node, the run states, branch labels', () => {
  const d = starterAutomation('a', 'A');
  d.edges[0].branch = 'ok';
  const g = graphOf(d, { node: 'done', message: 'bad' }, { nodes: { ask: { state: 'waiting' } } });
  assert.deepEqual(g.nodes.map((n) => [n.id, n.x, n.state, n.error]), [['ask', 40, 'waiting', undefined], ['done', 300, undefined, 'bad']]);
  assert.deepEqual(g.edges, [{ from: 'ask', to: 'done', label: 'ok' }]);
});

test('applyEdit keeps branches of kept edges, drops deleted nodes, adds new edges', () => {
  const d = starterAutomation('a', 'A');
  d.nodes.push({ id: 'x', kind: 'tool', tool_id: 'lathe__echo' });
  d.edges[0].branch = 'ok';
  applyEdit(d, { nodes: [{ id: 'ask', x: 1, y: 2 }, { id: 'done', x: 3, y: 4 }], edges: [{ from: 'ask', to: 'done' }, { from: 'done', to: 'ask' }, { from: 'ask', to: 'done' }] });
  assert.deepEqual(d.nodes.map((n) => [n.id, n.position]), [['ask', { x: 1, y: 2 }], ['done', { x: 3, y: 4 }]]);
  assert.deepEqual(d.edges, [{ from: 'ask', to: 'done', branch: 'ok' }, { from: 'done', to: 'ask' }]);
});

test('folderTree nests folders (implied parents too) and sorts', () => {
  const t = folderTree([{ path: 'ops/daily', name: 'daily' }, { path: 'a', name: 'A' }], [{ id: 'x', name: 'X', folder: 'ops/daily' }, { id: 'r', name: 'R', folder: null }]);
  assert.deepEqual(t.automations.map((a) => a.id), ['r']);
  assert.deepEqual(t.folders.map((f) => f.path), ['a', 'ops']);
  assert.equal(t.folders[1].folders[0].automations[0].id, 'x');
});

test('nodeTemplate picks a free ID; usageWords marks a subtotal; autoPath encodes', () => {
  assert.equal(nodeTemplate('tool', [{ id: 'tool1' }]).id, 'tool2');
  assert.equal(usageWords({ input_tokens: 3, output_tokens: 2, token_usage_known: false }), 'at least 3 in · 2 out tokens');
  assert.equal(autoPath('a b', '/runs'), '/api/automations/a%20b/runs');
});

test('layout puts nodes without a position in columns by depth', () => {
  const out = layout([{ id: 'a' }, { id: 'b' }, { id: 'c', x: 5, y: 6 }], [{ from: 'a', to: 'b' }]);
  assert.deepEqual(out.map((n) => [n.x, n.y]), [[40, 40], [280, 40], [5, 6]]);
});

test('a node form field says what is wrong with it', async () => {
  const { NODE_FIELDS, fieldProblem } = await import('../ui/autorules.js');
  const nodes = [{ id: 'ask' }, { id: 'done' }];
  const input = NODE_FIELDS.tool.find((f) => f.key === 'input');
  assert.equal(fieldProblem(input, '{"text": "{{node:ask}}"}', nodes, 'done'), '');
  assert.match(fieldProblem(input, '{"text": "{{node:ghost}}"}', nodes, 'done'), /names no node/);
  assert.match(fieldProblem(input, '{"text": ', nodes, 'done'), /not JSON/);
  assert.match(fieldProblem(NODE_FIELDS.agent[0], '', nodes, 'x'), /required/);
});
