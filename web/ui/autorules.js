// The Automations view's pure rules: paths, the starter record, the graph
// drawn from a record (with a validation error and a run's node states),
// an editor's edit folded back into the record, the folder tree, node
// templates and the words of a run. Tested in web/uitest.

/** autoPath is /api/automations/<id><rest>, the ID encoded. */
export function autoPath(id, rest = '') {
  return `/api/automations/${encodeURIComponent(id)}${rest}`;
}

/** emptyAutomation is a record with no nodes. */
export function emptyAutomation(id, name, folder = null) {
  return { id, name, enabled: true, folder, trigger: { kind: 'manual' }, nodes: [], edges: [] };
}

/** starterAutomation is a new record: an approval, then an echo of the answer. */
export function starterAutomation(id, name, folder = null) {
  return {
    ...emptyAutomation(id, name, folder),
    nodes: [
      { id: 'ask', kind: 'interrupt', input: 'Approve: {{trigger}}', resume_strategy: 'replace', position: { x: 40, y: 60 } },
      { id: 'done', kind: 'tool', tool_id: 'lathe__echo', input: '{"text": "approved: {{node:ask}}"}', position: { x: 300, y: 60 } },
    ],
    edges: [{ from: 'ask', to: 'done' }],
  };
}

/** detailOf is a node's one-line summary on the graph. */
export function detailOf(n) {
  switch (n.kind) {
    case 'agent': return `${n.agent_id || '?'}: ${n.input || ''}`;
    case 'tool': return n.tool_id || '?';
    case 'subgraph': return `→ ${n.automation_id || '?'}`;
    case 'map': return `each → ${n.body_node || '?'}`;
    case 'text_input': return n.label || '';
    case 'conditional': return (n.branches || []).map((b) => b.name).concat(n.default ? [`else ${n.default}`] : []).join(' · ');
    default: return n.input || '';
  }
}

/**
 * graphOf is what <lathe-graph> draws for a record: each node with its
 * kind, summary and position; the error on the node it names; the node
 * states of the run shown, when there is one.
 */
export function graphOf(d, error, run) {
  const nodes = d.nodes.map((n) => {
    const g = { id: n.id, label: n.id, kind: n.kind, detail: detailOf(n).slice(0, 80) };
    if (n.position) {
      g.x = n.position.x;
      g.y = n.position.y;
    }
    if (error?.node === n.id) g.error = error.message;
    const st = run?.nodes?.[n.id]?.state;
    if (st) g.state = st;
    return g;
  });
  const edges = d.edges.map((e) => (e.branch ? { from: e.from, to: e.to, label: e.branch } : { from: e.from, to: e.to }));
  return { nodes, edges };
}

/**
 * applyEdit folds an edit of the drawing ({nodes: [{id, x, y}], edges:
 * [{from, to}]}) into the record: positions, deleted nodes, and the edges
 * (an edge kept keeps its branch).
 */
export function applyEdit(d, { nodes, edges }) {
  const pos = new Map(nodes.map((n) => [n.id, n]));
  d.nodes = d.nodes.filter((n) => pos.has(n.id)).map((n) => ({ ...n, position: { x: pos.get(n.id).x, y: pos.get(n.id).y } }));
  const old = new Map(d.edges.map((e) => [`${e.from}\u0000${e.to}`, e]));
  const seen = new Set();
  d.edges = [];
  for (const e of edges) {
    const k = `${e.from}\u0000${e.to}`;
    if (seen.has(k)) continue;
    seen.add(k);
    d.edges.push(old.get(k) || { from: e.from, to: e.to });
  }
  return d;
}

/**
 * folderTree nests the folders and Automations: {folders: [{path, name,
 * folders, automations}], automations} with the root's Automations at the
 * top level, each level sorted by name.
 */
export function folderTree(folders, automations) {
  const root = { path: '', folders: [], automations: [] };
  const byPath = new Map([['', root]]);
  const ensure = (path) => {
    if (byPath.has(path)) return byPath.get(path);
    const i = path.lastIndexOf('/');
    const parent = ensure(i < 0 ? '' : path.slice(0, i));
    const f = { path, name: path.slice(i + 1), folders: [], automations: [] };
    parent.folders.push(f);
    byPath.set(path, f);
    return f;
  };
  for (const f of [...folders].sort((a, b) => a.path.localeCompare(b.path))) ensure(f.path).name = f.name || f.path.split('/').pop();
  for (const a of automations) ensure(a.folder || '').automations.push(a);
  const sort = (n) => {
    n.folders.sort((a, b) => a.name.localeCompare(b.name));
    n.automations.sort((a, b) => a.name.localeCompare(b.name));
    n.folders.forEach(sort);
  };
  sort(root);
  return root;
}

/** nodeTemplate is a new node of kind with a free ID. */
export function nodeTemplate(kind, nodes, tools = [], agents = []) {
  const n = nodeFields(kind, nodes, tools, agents);
  // To the right of the rightmost node, so it is not drawn over another.
  const right = Math.max(-220, ...nodes.map((x) => x.position?.x ?? 40));
  n.position = { x: right + 260, y: 60 };
  return n;
}

function nodeFields(kind, nodes, tools, agents) {
  const ids = new Set(nodes.map((n) => n.id));
  let i = 1;
  while (ids.has(`${kind}${i}`)) i++;
  const id = `${kind}${i}`;
  switch (kind) {
    case 'agent': return { id, kind, agent_id: agents[0]?.agent_id || 'coder', input: '{{trigger}}' };
    case 'tool': return { id, kind, tool_id: tools[0] || 'lathe__echo', input: '{"text": "{{trigger}}"}' };
    case 'conditional': return { id, kind, input: '{{trigger}}', branches: [{ name: 'yes', when: 'contains', value: 'yes' }], default: 'no' };
    case 'map': return { id, kind, input: '[]', body_node: '' };
    case 'subgraph': return { id, kind, automation_id: '', input: '{{trigger}}' };
    case 'text_input': return { id, kind, label: 'Value', default_value: '', placeholder: '', multiline: false };
    default: return { id, kind: 'interrupt', input: 'Approve: {{trigger}}', resume_strategy: 'replace' };
  }
}

/** usageWords says a usage, marking a known subtotal. */
export function usageWords(u) {
  if (!u) return '';
  const t = `${u.input_tokens} in · ${u.output_tokens} out`;
  return u.token_usage_known ? `${t} tokens` : `at least ${t} tokens`;
}

/** runSummary is a run's line in the history: when and how it started. */
export function runSummary(r) {
  const at = new Date(r.started_at);
  const when = Number.isNaN(at.getTime()) ? r.started_at : at.toLocaleString();
  const how = r.trigger?.kind === 'fork' ? 'fork' : r.trigger?.kind || '';
  return `${when} · ${how}`;
}

/**
 * NODE_FIELDS are the form fields of each node kind (the node editor's
 * form; anything else stays editable in its raw JSON): key, label, type
 * ('text', 'area', 'agent', 'tool', 'node', 'choice', 'check'), and
 * whether templates apply ({{trigger}}, {{node:id}}, {{item}}).
 */
export const NODE_FIELDS = {
  agent: [{ key: 'agent_id', label: 'Agent', type: 'agent', required: true }, { key: 'input', label: 'Input', type: 'area', template: true, required: true }],
  tool: [{ key: 'tool_id', label: 'Tool', type: 'tool', required: true }, { key: 'input', label: 'Arguments (JSON)', type: 'area', template: true, json: true }],
  conditional: [{ key: 'input', label: 'Input', type: 'area', template: true, required: true }, { key: 'default', label: 'Default branch', type: 'text', required: true }],
  map: [{ key: 'input', label: 'Items (a JSON array)', type: 'area', template: true, required: true }, { key: 'body_node', label: 'Body node', type: 'node', required: true }],
  subgraph: [{ key: 'automation_id', label: 'Automation', type: 'text', required: true }, { key: 'input', label: 'Input', type: 'area', template: true }],
  text_input: [{ key: 'label', label: 'Label', type: 'text', required: true }, { key: 'default_value', label: 'Default value', type: 'text' },
    { key: 'placeholder', label: 'Placeholder', type: 'text' }, { key: 'multiline', label: 'Several lines', type: 'check' }],
  interrupt: [{ key: 'input', label: 'Prompt', type: 'area', template: true, required: true },
    { key: 'resume_strategy', label: 'On resume', type: 'choice', choices: [['replace', 'the answer replaces the input'], ['append', 'the answer is appended']] }],
};

/** TEMPLATE_HINTS are the templates a node's text fields take. */
export const TEMPLATE_HINTS = ['{{trigger}}', '{{node:<id>}}', '{{item}}'];

/**
 * fieldProblem says what is wrong with a node field's value in words, or
 * '' : a required field left empty, a {{node:…}} naming no node, a JSON
 * field that does not parse once its templates are filled.
 */
export function fieldProblem(field, value, nodes, self) {
  const v = typeof value === 'string' ? value : value == null ? '' : String(value);
  if (field.required && !v.trim()) return `${field.label} is required.`;
  if (field.template) {
    const ids = new Set(nodes.map((n) => n.id));
    for (const m of v.matchAll(/\{\{node:([^}]*)\}\}/g)) {
      if (m[1] === self) return `{{node:${m[1]}}} names this node itself.`;
      if (!ids.has(m[1])) return `{{node:${m[1]}}} names no node of this graph.`;
    }
  }
  if (field.json && v.trim()) {
    try {
      JSON.parse(v.replace(/\{\{[^}]*\}\}/g, 'x'));
    } catch {
      return `${field.label} is not JSON.`;
    }
  }
  if (field.type === 'node' && v && !nodes.some((n) => n.id === v)) return `No node is called ${v}.`;
  return '';
}
