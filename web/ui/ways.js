// The Ways panel: start N isolated Attempts at one task (after a plan
// preview), watch the lanes stream side by side, compare their changed
// files and diffs, verify, judge, price them, then Keep one or Discard all.
// Everything comes back after a reload: the durable Results and, for the
// lanes still running, the snapshot's attempt runs and their frames.

import { html, nothing } from '/vendor/lit.js';
import { api, path, sessionPath } from './api.js';
import { RESOLVED, briefArgs, laneOf, laneBodies, usd } from './waysrules.js';

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
  }

  /** load reads the Session's current set (on open, reload or a set event). */
  async load(session = this.session) {
    if (!session) return;
    if (session !== this.session) {
      this.session = session;
      this.results = null;
      this.lanes = new Map();
      this.diff = this.cost = this.plan = null;
    }
    try {
      this.results = await api('GET', sessionPath(session, '/variants/results'));
    } catch (err) {
      if (err.status !== 404) this.app.fail(err, 'Loading the Ways');
      this.results = null;
    }
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
    this.app.update();
    try {
      await fn();
    } catch (err) {
      this.app.fail(err, what);
    } finally {
      this.busy = '';
      this.app.update();
    }
  }

  agentOf() {
    const s = this.app.state.sessions.get(this.session);
    return s?.mode?.agent_id;
  }

  previewPlan() {
    return this.run('Planning', async () => {
      this.plan = await api('POST', sessionPath(this.session, '/variants/plan'), { task: this.form.task, agent_id: this.agentOf() });
    });
  }

  start() {
    return this.run('Starting the Ways', async () => {
      const body = { input: this.plan?.instruction || this.form.task, task: this.form.task, n: Number(this.form.n) };
      const lanes = laneBodies(this.form.models, body.n);
      if (lanes) body.lanes = lanes;
      await api('POST', sessionPath(this.session, '/variants'), body);
      this.lanes = new Map();
      this.plan = null;
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
      this.results = await api('POST', sessionPath(this.session, '/variants/judge'), { attempt_set_id: this.setID(), agent_id: this.agentOf() });
    });
  }

  loadCost(baseline = 0) {
    return this.run('Pricing', async () => {
      this.cost = await api('GET', path(sessionPath(this.session, '/variants/cost'), { attempt_set_id: this.setID(), baseline }));
    });
  }

  showDiff(index, file) {
    return this.run('Reading the diff', async () => {
      const d = await api('GET', path(sessionPath(this.session, '/variants/diff'), { attempt_set_id: this.setID(), index, path: file }));
      this.diff = { index, ...d };
    });
  }

  keep(index) {
    const a = this.results.attempts[index];
    const ok = confirm(`Keep Attempt ${index} (${a.model})?\n\nIts changes to ${a.changed_files.length} file(s) are written into this Session's checkout ` +
      'as uncommitted working-tree changes, its turn joins the conversation, and every other Attempt is removed.');
    if (!ok) return;
    return this.run('Keeping', async () => {
      this.results = await api('POST', sessionPath(this.session, '/variants/adopt'), { attempt_set_id: this.setID(), index });
    });
  }

  discard() {
    if (!confirm('Discard every Attempt?\n\nThe running lanes are stopped and all their sandboxes and copies removed. Your checkout is not changed.')) return;
    return this.run('Discarding', async () => {
      this.results = await api('POST', sessionPath(this.session, '/variants/discard'), { attempt_set_id: this.setID() });
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
      <button type="button" ?disabled=${!f.task.trim() || !!w.busy} @click=${() => w.previewPlan()}>Preview plan</button>
      <button class="primary" type="submit" ?disabled=${!f.task.trim() || !!w.busy}>Start ${f.n} Ways</button>
    </div>
    ${w.plan ? html`<div class="ways-plan" aria-label="Plan"><ol>${w.plan.plan.map((p) => html`<li>${p}</li>`)}</ol>
      <p class="meta">Plan usage: ${w.plan.control_usage.input_tokens} in / ${w.plan.control_usage.output_tokens} out, ${usd(w.plan.control_usage.usd)}</p></div>` : nothing}
  </form>`;
}

function setView(app, w, r) {
  const open = !RESOLVED.has(r.state);
  const ranks = new Map((r.judgment?.ranking || []).map((x) => [x.index, x]));
  return html`<div class="ways-set" data-state=${r.state}>
    <p class="meta">Set <code>${r.attempt_set_id}</code>: <b class="ways-state">${r.state}</b>${r.keep ? html` · Keep of Attempt ${r.keep.index}: ${r.keep.phase}` : nothing}
      ${r.check_configured ? nothing : html` · <span class="warn">no Check configured: Keep takes an unverified Attempt</span>`}</p>
    <div class="ways-lanes">
      ${r.attempts.map((a) => laneView(app, w, r, a, ranks.get(a.index)))}
    </div>
    ${open
      ? html`<div class="row ways-actions">
          <button ?disabled=${r.state !== 'ready' || !!w.busy} @click=${() => w.verify()}>Verify</button>
          <button ?disabled=${r.state !== 'ready' || !!w.busy} @click=${() => w.judge()}>Judge</button>
          <button ?disabled=${!!w.busy} @click=${() => w.loadCost(0)}>Cost</button>
          <button class="danger" ?disabled=${!!w.busy || !!r.keep} @click=${() => w.discard()}>Discard all</button>
        </div>`
      : html`<div class="row"><button @click=${() => w.loadCost(0)}>Cost</button></div>`}
    ${w.cost ? costView(w.cost) : nothing}
    ${w.diff ? diffView(w) : nothing}
  </div>`;
}

function laneView(app, w, r, a, rank) {
  const live = w.lanes.get(a.index);
  const open = !RESOLVED.has(r.state);
  return html`<article class="ways-lane" data-index=${a.index} data-state=${a.state} aria-label=${`Attempt ${a.index}`}>
    <header><b>Attempt ${a.index}</b> <span class="meta">${a.model}</span> <span class="badge">${a.state}</span>
      ${rank ? html`<span class="badge rank" title=${rank.reason}>#${rank.rank}</span>` : nothing}</header>
    ${rank ? html`<p class="meta reason">Judge: ${rank.reason}</p>` : nothing}
    ${a.output || live?.text ? html`<pre class="lane-text">${a.output || live.text}</pre>` : nothing}
    ${live?.tools?.length ? html`<ul class="lane-tools">${live.tools.map((t) => html`<li><code>${t}</code></li>`)}</ul>` : nothing}
    ${a.error ? html`<p class="error">${a.error}</p>` : nothing}
    ${a.changed_files.length
      ? html`<ul class="lane-files" aria-label="Changed files">${a.changed_files.map((p) => html`<li><button class="link" @click=${() => w.showDiff(a.index, p)}>${p}</button></li>`)}</ul>`
      : nothing}
    ${a.verdict ? html`<p class=${a.verdict.passed ? 'ok' : 'error'}>Check ${a.verdict.passed ? 'passed' : `failed (exit ${a.verdict.exit_code})`}</p>` : nothing}
    <p class="meta">${a.usage.input_tokens} in / ${a.usage.output_tokens} out${a.usage.token_usage_known ? '' : ' (subtotal)'} · ${usd(a.usage.usd)}${a.usage.usd_known ? '' : ' (price unknown)'}</p>
    ${open ? html`<button class="primary" ?disabled=${!!a.not_keepable || !!w.busy} title=${a.not_keepable || ''} @click=${() => w.keep(a.index)}>Keep</button>` : nothing}
  </article>`;
}

function costView(c) {
  return html`<table class="ways-cost" aria-label="Cost">
    <thead><tr><th>Attempt</th><th>Model</th><th>Actual</th><th>On ${c.baseline_model}</th></tr></thead>
    <tbody>${c.lanes.map((l) => html`<tr><td>${l.index}</td><td>${l.model}</td><td>${usd(l.actual_usd)}</td><td>${usd(l.baseline_usd)}</td></tr>`)}</tbody>
    <tfoot><tr><td colspan="2">Total</td><td>${usd(c.total_usd)}</td><td>${usd(c.baseline_usd)}</td></tr>
      <tr><td colspan="4">Saved against the baseline: ${usd(c.saved)}${c.all_local ? ' · all local' : ''}</td></tr></tfoot>
  </table>`;
}

function diffView(w) {
  const d = w.diff;
  return html`<div class="ways-diff" aria-label="Diff">
    <header><b>${d.path}</b> <span class="meta">Attempt ${d.index}</span> <button class="icon" aria-label="Close the diff" @click=${() => { w.diff = null; w.app.update(); }}>×</button></header>
    ${d.binary ? html`<p>Binary file.</p>` : html`<div class="two"><pre class="before">${d.before ?? '(absent)'}</pre><pre class="after">${d.after ?? '(absent)'}</pre></div>`}
  </div>`;
}
