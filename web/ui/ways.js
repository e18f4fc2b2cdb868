// The Ways panel: start N isolated Attempts at one task (after a plan
// preview), watch the lanes stream side by side, compare their changed
// files and diffs, verify, judge, price them, then Keep one or Discard all.
// Everything comes back after a reload: the durable Results and, for the
// lanes still running, the snapshot's attempt runs and their frames.

import { html, nothing } from '/vendor/lit.js';
import { api, path, sessionPath } from './api.js';
import { persisted } from './util.js';
import { ranLine, ranOf } from './store.js';
import { agentName } from './dialogs.js';
import { diffView as lineDiffView } from './diffview.js';
import { RESOLVED, briefArgs, costWords, keepWords, laneOf, laneBodies, savedWords, usd } from './waysrules.js';

/** Ways is the panel's state and actions for the current Session. */
export class Ways {
  constructor(app) {
    this.app = app;
    this.session = null;
    this.results = null; // GET variants/results, or null when none
    this.lanes = new Map(); // index → {text, tools: []} streamed for the current set
    this.form = { task: '', n: 2, models: '' };
    this.plan = null;
    this.diff = null; // {index, path, before, after}
    this.cost = null;
    this.busy = '';
    this.error = ''; // the last action's refusal, in words beside the controls
  }

  /** reset forgets everything shown of a set: the lanes' streams, the plan, the diff and the cost. */
  reset() {
    this.error = '';
    this.lanes = new Map();
    this.diff = this.cost = this.plan = null;
  }

  /** load reads the Session's current set (on open, reload or a set event). */
  async load(session = this.session) {
    if (!session) return;
    if (session !== this.session) {
      this.session = session;
      this.results = null;
      this.reset();
    }
    let r = null;
    try {
      // optional: a Session that never ran Ways answers 204, not a 404.
      r = await api('GET', path(sessionPath(session, '/variants/results'), { optional: 'true' }));
    } catch (err) {
      if (err.status !== 404) this.app.fail(err, 'Loading the Ways');
    }
    if (session !== this.session) return; // another Session's panel took over meanwhile
    const prev = this.setID();
    this.results = r;
    // Every view follows the current set: a new one starts from nothing.
    if (prev && r?.attempt_set_id !== prev) this.reset();
    else if (this.cost && r) this.loadCost(this.cost.baseline, { quiet: true }); // its figures moved on
    this.app.update();
  }

  /** frame applies a lane frame (lane-started, its token/tool-call frames, lane-verified). */
  frame(f) {
    const r = this.results;
    if (!r || f.attempt_set_id !== r.attempt_set_id) {
      // A frame of another set: a newer one started elsewhere, or an older one's.
      if (f.kind === 'lane-started' && f.session === this.session) this.load();
      return;
    }
    const index = f.kind === 'lane-started' || f.kind === 'lane-verified' ? f.index : laneOf(r, f.workflow);
    if (index < 0) return;
    const lane = this.lanes.get(index) || { text: '', tools: [] };
    if (f.kind === 'token') lane.text += f.delta;
    if (f.kind === 'tool-call' && f.phase === 'start') lane.tools.push(`${f.name} ${briefArgs(f.arguments)}`);
    this.lanes.set(index, lane);
    if (f.kind === 'lane-started' || f.kind === 'lane-verified') this.load();
    this.app.update();
  }

  setID() {
    return this.results?.attempt_set_id;
  }

  async run(what, fn) {
    this.busy = what;
    this.error = '';
    this.app.update();
    try {
      await fn();
    } catch (err) {
      if (err.status === 401) this.app.fail(err);
      this.error = `${what}: ${err.message}`; // shown beside the panel's controls
    } finally {
      this.busy = '';
      this.app.update();
    }
  }

  agentOf() {
    const s = this.app.state.sessions.get(this.session);
    return s?.mode?.agent_id;
  }

  /** workspaceOf is the current Session's Workspace, whose planner and judge choice is remembered. */
  workspaceOf() {
    return this.app.state.sessions.get(this.session)?.workspace_id || '';
  }

  /** controlAgent is the Agent chosen for 'planner' or 'judge' in this Workspace, or the Session's own. */
  controlAgent(role) {
    const chosen = persisted(`ways-${role}.${this.workspaceOf()}`, '').get();
    return this.app.ui.agents.some((a) => a.agent_id === chosen) ? chosen : this.agentOf();
  }

  setControlAgent(role, id) {
    persisted(`ways-${role}.${this.workspaceOf()}`, '').set(id === this.agentOf() ? '' : id);
    this.app.update();
  }

  previewPlan() {
    return this.run('Planning', async () => {
      this.plan = await api('POST', sessionPath(this.session, '/variants/plan'), { task: this.form.task, agent_id: this.controlAgent('planner') });
    });
  }

  start() {
    return this.run('Starting the Ways', async () => {
      const body = { input: this.plan?.instruction || this.form.task, task: this.form.task, n: Number(this.form.n) };
      const lanes = laneBodies(this.form.models, body.n);
      if (lanes) body.lanes = lanes;
      await api('POST', sessionPath(this.session, '/variants'), body);
      this.reset();
      await this.load();
    });
  }

  verify() {
    return this.run('Verifying', async () => {
      this.results = await api('POST', sessionPath(this.session, '/variants/verify'), { attempt_set_id: this.setID() });
    });
  }

  judge() {
    return this.run('Judging', async () => {
      this.results = await api('POST', sessionPath(this.session, '/variants/judge'), { attempt_set_id: this.setID(), agent_id: this.controlAgent('judge') });
    });
  }

  /** loadCost prices the current set; quiet re-reads it without the busy line (after a lane moved on). */
  async loadCost(baseline = 0, { quiet = false } = {}) {
    const id = this.setID();
    const read = async () => {
      const c = await api('GET', path(sessionPath(this.session, '/variants/cost'), { attempt_set_id: id, baseline }));
      if (this.setID() === id) this.cost = c; // a report of a set no longer shown is dropped
    };
    if (!quiet) return this.run('Pricing', read);
    try {
      await read();
    } catch {
      // the next load tries again; the shown figures stay until then
    }
    this.app.update();
  }

  showDiff(index, file) {
    return this.run('Reading the diff', async () => {
      const id = this.setID();
      const d = await api('GET', path(sessionPath(this.session, '/variants/diff'), { attempt_set_id: id, index, path: file }));
      if (this.setID() === id) this.diff = { index, set: id, ...d };
    });
  }

  keep(index) {
    const a = this.results.attempts[index];
    const files = a.changed_files;
    this.app.dialogs.open('confirm', {
      title: `Keep Attempt ${index} (${a.model})?`,
      body: html`<p>Its changes to ${files.length} file${files.length === 1 ? '' : 's'} are written into this Session's checkout as
          uncommitted working-tree changes (no commit), its turn joins the conversation, and every other Attempt is removed.</p>
        ${files.length ? html`<ul class="mono small">${files.slice(0, 20).map((f) => html`<li>${f}</li>`)}${files.length > 20 ? html`<li>and ${files.length - 20} more</li>` : nothing}</ul>` : nothing}`,
      label: 'Keep this Attempt',
      action: async () => {
        this.results = await api('POST', sessionPath(this.session, '/variants/adopt'), { attempt_set_id: this.setID(), index });
      },
    });
  }

  discard() {
    const n = this.results.attempts.length;
    this.app.dialogs.open('confirm', {
      title: 'Discard every Attempt?',
      body: html`<p>The ${n} Attempt${n === 1 ? '' : 's'} and their changes are thrown away: running lanes stop, and their sandboxes
        and copies are removed. Your checkout is not changed.</p>`,
      label: 'Discard all',
      cls: 'danger',
      action: async () => {
        this.results = await api('POST', sessionPath(this.session, '/variants/discard'), { attempt_set_id: this.setID() });
      },
    });
  }
}


/** waysView renders the panel in the inspector. */
export function waysView(app, s) {
  const w = app.ways;
  if (w.session !== s.id) {
    w.load(s.id);
    return html`<section class="ways"><p>Loading…</p></section>`;
  }
  const r = w.results;
  const open = r && !RESOLVED.has(r.state);
  return html`<section class="ways" aria-label="Ways">
    <header class="ways-head"><h2>Ways</h2>${w.busy ? html`<span class="meta" role="status">${w.busy}…</span>` : nothing}</header>
    ${open ? nothing : startView(app, w)}
    ${r ? setView(app, w, r) : nothing}
  </section>`;
}

function startView(app, w) {
  const f = w.form;
  const set = (k) => (e) => { f[k] = e.target.value; app.update(); };
  return html`<form class="ways-start" @submit=${(e) => { e.preventDefault(); w.start(); }}>
    <label>Task <textarea name="task" rows="3" .value=${f.task} @input=${set('task')} required></textarea></label>
    <div class="row">
      <label>Ways <input name="n" type="number" min="1" max="8" .value=${String(f.n)} @input=${set('n')}></label>
      <label>Models <input name="models" placeholder="per lane, comma-separated (optional)" .value=${f.models} @input=${set('models')}></label>
    </div>
    <div class="row">
      ${controlPicker(app, w, 'planner', 'Planner', 'The Agent that previews the plan; remembered for this Workspace')}
      ${controlPicker(app, w, 'judge', 'Judge', 'The Agent that ranks the Attempts; remembered for this Workspace')}
    </div>
    <div class="row">
      <button type="button" ?disabled=${!f.task.trim() || !!w.busy} @click=${() => w.previewPlan()}>Preview plan</button>
      <button class="primary" type="submit" ?disabled=${!f.task.trim() || !!w.busy}>Start ${f.n} Ways</button>
    </div>
    ${w.error ? html`<p class="error-text ways-error" role="alert">⚠ ${w.error}</p>` : nothing}
    ${w.plan ? html`<div class="ways-plan" aria-label="Plan"><ol>${w.plan.plan.map((p) => html`<li>${p}</li>`)}</ol>
      <p class="meta">Plan usage: ${w.plan.control_usage.input_tokens} in / ${w.plan.control_usage.output_tokens} out, ${usd(w.plan.control_usage.usd)}</p></div>` : nothing}
  </form>`;
}

/** controlPicker chooses the Agent of a control inference (the planner or the judge) among the configured ones. */
function controlPicker(app, w, role, label, title) {
  const cur = w.controlAgent(role);
  const own = w.agentOf();
  return html`<label title=${title}>${label}
    <select name=${role} aria-label=${label} .value=${cur || ''} @change=${(e) => w.setControlAgent(role, e.target.value)}>
      ${app.ui.agents.map((a) => html`<option value=${a.agent_id} ?selected=${a.agent_id === cur}>${a.name || a.agent_id}${a.agent_id === own ? ' (this Session’s Agent)' : ''}</option>`)}
    </select></label>`;
}

function setView(app, w, r) {
  const open = !RESOLVED.has(r.state);
  const ranks = new Map((r.judgment?.ranking || []).map((x) => [x.index, x]));
  return html`<div class="ways-set" data-state=${r.state} data-set=${r.attempt_set_id}>
    <p class="meta">Set <code>${r.attempt_set_id}</code>: <b class="ways-state">${r.state}</b>${r.keep ? html` · <span class="keep-phase">${keepWords(r.keep)}</span>` : nothing}
      ${r.check_configured ? nothing : html` · <span class="warn">no Check configured: Keep takes an unverified Attempt</span>`}</p>
    <div class="ways-lanes">
      ${r.attempts.map((a) => laneView(app, w, r, a, ranks.get(a.index)))}
    </div>
    ${open
      ? html`<div class="row ways-actions">
          <button ?disabled=${r.state !== 'ready' || !!w.busy} @click=${() => w.verify()}>Verify</button>
          <button ?disabled=${r.state !== 'ready' || !!w.busy} @click=${() => w.judge()} title="Ranked by ${w.controlAgent('judge')}">Judge</button>
          ${controlPicker(app, w, 'judge', 'Judge', 'The Agent that ranks the Attempts; remembered for this Workspace')}
          <button ?disabled=${!!w.busy} @click=${() => w.loadCost(0)}>Cost</button>
          <button class="danger" ?disabled=${!!w.busy || !!r.keep} @click=${() => w.discard()}>Discard all</button>
        </div>`
      : html`<div class="row"><button @click=${() => w.loadCost(0)}>Cost</button></div>`}
    ${w.error && open ? html`<p class="error-text ways-error" role="alert">⚠ ${w.error}</p>` : nothing}
    ${w.cost ? costView(w.cost) : nothing}
    ${w.diff ? diffView(w) : nothing}
  </div>`;
}

function laneView(app, w, r, a, rank) {
  const live = w.lanes.get(a.index);
  const open = !RESOLVED.has(r.state);
  return html`<article class="ways-lane" data-index=${a.index} data-state=${a.state} aria-label=${`Attempt ${a.index}`}>
    <header><b>Attempt ${a.index}</b> <span class="meta lane-ran" title=${a.agent_name ? `Agent ${a.agent}, reported as ${a.agent_name} ${a.agent_version}` : `Agent ${a.agent}`}>${a.agent_name || a.agent_version
      ? ranLine(ranOf(a), (id) => agentName(app, id)) : a.model}</span> <span class="badge">${a.state}</span>
      ${rank ? html`<span class="badge rank" title=${rank.reason}>#${rank.rank}</span>` : nothing}</header>
    ${rank ? html`<p class="meta reason">Judge: ${rank.reason}</p>` : nothing}
    ${a.output || live?.text ? html`<pre class="lane-text">${a.output || live.text}</pre>` : nothing}
    ${live?.tools?.length ? html`<ul class="lane-tools">${live.tools.map((t) => html`<li><code>${t}</code></li>`)}</ul>` : nothing}
    ${a.error ? html`<p class="error">${a.error}</p>` : nothing}
    ${a.changed_files.length
      ? html`<ul class="lane-files" aria-label="Changed files">${a.changed_files.map((p) => html`<li>${open
          ? html`<button class="link" @click=${() => w.showDiff(a.index, p)}>${p}</button>`
          : html`<code title="The Attempt's copy is gone once the set is kept or discarded">${p}</code>`}</li>`)}</ul>`
      : nothing}
    ${a.verdict ? html`<p class=${a.verdict.passed ? 'ok' : 'error'}>Check ${a.verdict.passed ? 'passed' : `failed (exit ${a.verdict.exit_code})`}</p>` : nothing}
    <p class="meta lane-usage">${a.usage.input_tokens} in / ${a.usage.output_tokens} out${a.usage.token_usage_known ? '' : ' (subtotal)'} · <span class="lane-cost">${costWords(a.usage.usd, a.usage.usd_known)}</span></p>
    ${open ? html`<button class="primary" ?disabled=${!!a.not_keepable || !!w.busy} title=${a.not_keepable || ''} @click=${() => w.keep(a.index)}>Keep</button>` : nothing}
  </article>`;
}

function costView(c) {
  return html`<table class="ways-cost" aria-label="Cost" data-set=${c.attempt_set_id}>
    <thead><tr><th>Attempt</th><th>Model</th><th>Actual</th><th>On ${c.baseline_model}</th></tr></thead>
    <tbody>${c.lanes.map((l) => html`<tr><td>${l.index}</td><td>${l.model}</td><td>${costWords(l.actual_usd, l.actual_cost_known)}${l.local ? ' · local' : ''}</td><td>${costWords(l.baseline_usd, l.baseline_cost_known)}</td></tr>`)}</tbody>
    <tfoot><tr><td colspan="2">Total</td><td>${costWords(c.total_usd, c.actual_cost_known)}</td><td>${costWords(c.baseline_usd, c.baseline_cost_known)}</td></tr>
      <tr><td colspan="4">Saved against the baseline: ${savedWords(c)}</td></tr></tfoot>
  </table>`;
}
function diffView(w) {
  const d = w.diff;
  return html`<div class="ways-diff" aria-label="Diff">
    <header><b>${d.path}</b> <span class="meta">Attempt ${d.index}</span> <button class="icon" aria-label="Close the diff" @click=${() => { w.diff = null; w.app.update(); }}>×</button></header>
    ${d.binary ? html`<p>Binary file.</p>`
      : html`${d.before === null || d.before === undefined ? html`<p class="muted small">A new file: it was not in the snapshot.</p>` : nothing}
        ${d.after === null || d.after === undefined ? html`<p class="muted small">The Attempt deleted it.</p>` : nothing}
        ${lineDiffView(w.app, d, `Changes to ${d.path}: the snapshot ⇄ Attempt ${d.index}`, { session: w.session, path: d.path, source: `Ways Attempt ${d.index}` })}`}
  </div>`;
}
