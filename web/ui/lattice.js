// A lattice turn in the conversation: the coordinator's plan (subtasks,
// their Workers and what each waits for) and each Worker's own collapsible
// stream with its state marked. The coordinator's own parts (planning, the
// synthesis) stay in the turn's main flow.
//
// The plan is drawn as a graph by the Automations editor's component
// (<lathe-graph>, served under /lattice/: nodes are the subtasks with their
// Worker and status, edges their depends_on), and said in words, one row per
// round of the dependency tree (latticerules.levels).

import { html, nothing } from '/vendor/lit.js';
import { STATE_WORDS, workers, levels } from './latticerules.js';

const MARK = { waiting: '◌', running: '●', completed: '✓', failed: '✕', skipped: '–', cancelled: '■', interrupted: '!' };

/**
 * latticeView renders a lattice turn's Agent side; partView renders one
 * part (text, reasoning, tool card) as the single-Agent conversation does,
 * and name(id) names an Agent (dialogs.agentName: one naming everywhere).
 */
export function latticeView(t, partView, name = (id) => id) {
  const plan = t.lattice;
  const coordinator = plan.coordinator;
  const own = t.parts.filter((p) => partAgent(p) === coordinator || partAgent(p) === '');
  const planned = own.findIndex((p) => p.kind === 'tool' && p.tool.name === 'submit_plan');
  const before = planned < 0 ? own : own.slice(0, planned + 1);
  const after = planned < 0 ? [] : own.slice(planned + 1);
  return html`${before.map(partView)}
    ${planView(plan, name)}
    <div class="lattice-workers">
      ${workers(plan).map((w) => workerView(w, t.parts.filter((p) => partAgent(p) === w.worker), partView, name))}
    </div>
    ${after.length ? html`<div class="lattice-synthesis">${after.map(partView)}</div>` : nothing}`;
}

function partAgent(p) {
  return p.kind === 'tool' ? p.tool.agent || '' : p.agent || '';
}

/** planView is the plan drawn as a graph (subtasks, their Workers, what waits for what), then as rounds in words. */
function planView(plan, name) {
  loadGraph();
  return html`<section class="lattice-plan" aria-label="Plan">
    <div class="who">Plan <span class="muted small" title="Agent ${plan.coordinator}">by ${name(plan.coordinator)}</span></div>
    ${plan.goal ? html`<p class="lattice-goal">${plan.goal}</p>` : nothing}
    <lathe-graph class="lattice-graph" aria-hidden="true" .editable=${false} .graph=${planGraph(plan, name)}></lathe-graph>
    <ol class="lattice-rounds">
      ${levels(plan).map((round, i) => html`<li class="lattice-round">
        <span class="muted small">${i === 0 ? 'First' : `Then (round ${i + 1})`}</span>
        <ul>${round.map((st) => html`<li class="lattice-subtask ls-${st.status}" data-subtask=${st.id} title=${st.instruction}>
          <span class="lattice-mark" aria-hidden="true">${MARK[stateClass(st.status)] || '◌'}</span>
          <b>${st.title}</b> <span class="muted small">(${st.id})</span>
          → <span class="lattice-worker" title="Agent ${st.worker}">${name(st.worker)}</span>
          <span class="lattice-state" data-status=${st.status}>${STATE_WORDS[st.status] || st.status}</span>
          ${st.depends_on.length ? html`<span class="muted small lattice-after">after ${st.depends_on.join(', ')}</span>` : nothing}
          ${st.tokens !== null ? html`<span class="muted small">· ${st.tokens.toLocaleString('en-US')} tokens</span>` : nothing}
          ${st.error ? html`<div class="error-text small">${st.error}</div>` : nothing}
        </li>`)}</ul>
      </li>`)}
    </ol>
  </section>`;
}

// The graph component (web/lattice/graph.js, the Automations editor's) loads
// with the first plan shown, not with the workbench.
let graphLoading;
function loadGraph() {
  graphLoading ??= import('/lattice/graph.js');
}

/** GRAPH_STATE maps a subtask's status onto the graph component's node states. */
const GRAPH_STATE = { pending: 'pending', waiting: 'pending', activated: 'running', completed: 'succeeded', failed: 'failed', panicked: 'failed', skipped: 'skipped', cancelled: 'skipped', interrupted: 'failed' };

/** planGraph is the plan as the graph component's nodes and edges, each node's kind its Worker's name. */
export function planGraph(plan, name = (id) => id) {
  return {
    nodes: plan.subtasks.map((st) => ({ id: st.id, label: st.title, kind: name(st.worker), detail: STATE_WORDS[st.status] || st.status, state: GRAPH_STATE[st.status] || 'pending' })),
    edges: plan.subtasks.flatMap((st) => (st.depends_on || []).map((d) => ({ from: d, to: st.id }))),
  };
}

function stateClass(status) {
  switch (status) {
    case 'activated': return 'running';
    case 'pending': return 'waiting';
    case 'panicked': return 'failed';
    default: return status;
  }
}

/** workerView is one Worker's stream: its subtasks' parts, collapsible, its state marked. */
function workerView(w, parts, partView, name) {
  return html`<details class="lattice-stream wk-${w.state}" data-worker=${w.worker} ?open=${w.state === 'running' || w.state === 'failed'}>
    <summary><span class="lattice-mark" aria-hidden="true">${MARK[w.state] || '◌'}</span>
      Worker <b title="Agent ${w.worker}">${name(w.worker)}</b> <span class="worker-state" data-state=${w.state}>${w.state}</span>
      <span class="muted small">· ${w.subtasks.map((s) => s.id).join(', ')}</span></summary>
    ${parts.length ? parts.map(partView) : html`<p class="muted small">Nothing streamed yet.</p>`}
  </details>`;
}
