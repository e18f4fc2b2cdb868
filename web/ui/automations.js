// The Automations view (#/automations, #/automations/<id>, in the centre):
// a folder tree of the Automations, the selected one's editor (name,
// folder, enabled, trigger settings, the graph drawn and edited with
// <lathe-graph>, a node's fields as JSON, the edges' branches), Save with
// the validation error shown on its node, Run, and the run history with
// per-node state, output and usage, live from the runs' event frames, and
// Fork. Pending Interrupts show as prompts with Resume and Cancel in every
// view of every tab (interruptsView), read from GET /api/interrupts at each
// (re)connect and after each run event.

import { html, nothing, live, repeat } from '/vendor/lit.js';
import { api } from './api.js';
import { autoPath, emptyAutomation, starterAutomation, graphOf, applyEdit, folderTree, nodeTemplate, runSummary, usageWords, NODE_FIELDS, TEMPLATE_HINTS, fieldProblem } from './autorules.js';
import '/lattice/graph.js';
import { answerView } from './session.js';

const mdParts = new Map(); // an output's text → its Markdown part, so each renders once

/** mdPart is a run output as a text part the conversation's Markdown view renders. */
function mdPart(text) {
  let p = mdParts.get(text);
  if (!p) {
    if (mdParts.size > 200) mdParts.clear();
    p = { kind: 'text', text };
    mdParts.set(text, p);
  }
  return p;
}

export class Automations {
  constructor(app) {
    this.app = app;
    this.list = null; // records, once read
    this.folders = [];
    this.tools = [];
    this.interrupts = [];
    this.values = new Map(); // interrupt key → typed value
    this.draft = null; // the selected Automation being edited
    this.dirty = false;
    this.error = null; // {message, node?, edge?}
    this.selectedNode = null;
    this.nodeText = '';
    this.runs = [];
    this.openRun = null; // run id shown
    this.runInput = '';
    this.creating = null; // {id, name} of the new-Automation form
    this.folderForm = null; // {path}
    this.gen = 0;
    this.refreshTimer = 0;
  }

  isOpen() {
    return this.app.ui.route.view === 'automations';
  }

  show(id) {
    this.app.ui.railOpen = false;
    this.app.go({ view: 'automations', automation: id || null });
  }

  /** load re-reads the records, folders and tools, and the selected one's runs. */
  async load() {
    const gen = ++this.gen;
    try {
      const [list, folders, tools] = await Promise.all([api('GET', '/api/automations'), api('GET', '/api/automation-folders'), api('GET', '/api/tools')]);
      if (gen !== this.gen) return;
      this.list = list || [];
      this.folders = folders || [];
      this.tools = tools || [];
    } catch (err) {
      this.app.fail(err, 'Loading Automations');
    }
    this.select(this.app.ui.route.automation);
    this.app.update();
  }

  /** select makes the Automation id the one edited (unless it already is). */
  select(id) {
    if (!id) {
      this.draft = null;
      return;
    }
    if (this.draft?.id === id && (this.dirty || this.draft._saved)) {
      this.loadRuns();
      return;
    }
    const rec = (this.list || []).find((a) => a.id === id);
    if (!rec) {
      this.draft = null;
      return;
    }
    this.draft = { ...structuredClone(rec), _saved: true };
    this.dirty = false;
    this.error = null;
    this.selectedNode = null;
    this.openRun = null;
    this.loadRuns();
  }

  async loadRuns() {
    const id = this.draft?.id;
    if (!id || !this.draft._saved) return;
    try {
      const runs = await api('GET', autoPath(id, '/runs'));
      if (this.draft?.id !== id) return;
      this.runs = runs || [];
      if (!this.openRun && this.runs.length) this.openRun = this.runs[0].run_id;
    } catch (err) {
      if (err.status !== 404) this.app.fail(err, 'Loading the runs');
    }
    this.app.update();
  }

  async loadInterrupts() {
    try {
      this.interrupts = (await api('GET', '/api/interrupts')) || [];
    } catch (err) {
      if (err.status === 401) this.app.fail(err);
      return;
    }
    this.app.update();
  }

  /** event follows the journal's event frames: runs and records. */
  event(f) {
    if (f.aggregate === 'automation-run') {
      // Coalesce a burst of node events into one re-read.
      clearTimeout(this.refreshTimer);
      this.refreshTimer = setTimeout(() => {
        this.loadInterrupts();
        if (this.isOpen()) this.loadRuns();
      }, 50);
    } else if ((f.aggregate === 'automation' || f.aggregate === 'automation-folders') && this.isOpen() && !this.dirty) {
      this.load();
    }
  }

  edit(fn) {
    fn(this.draft);
    this.dirty = true;
    this.app.update();
  }

  async save() {
    const d = this.draft;
    const body = { ...d };
    delete body._saved;
    delete body.created_at;
    delete body.updated_at;
    delete body.last_triggered_at;
    delete body.skipped_triggers;
    try {
      const method = d._saved ? 'PUT' : 'POST';
      const rec = await api(method, d._saved ? autoPath(d.id) : '/api/automations', body);
      this.draft = { ...rec, _saved: true };
      this.dirty = false;
      this.error = null;
      this.app.toast(`Saved ${rec.name}`);
      await this.load();
      if (this.app.ui.route.automation !== rec.id) this.show(rec.id);
    } catch (err) {
      this.error = { message: err.message, node: err.body?.node, edge: err.body?.edge };
    }
    this.app.update();
  }

  async remove() {
    const d = this.draft;
    if (!d?._saved) return;
    this.app.dialogs.confirm({
      title: `Delete the Automation ${d.name}?`,
      body: html`<p>Its graph and settings are removed; its active runs are cancelled first. Finished runs stay in the history.</p>`,
      label: 'Delete Automation',
      action: async () => {
        await api('DELETE', autoPath(d.id));
        this.draft = null;
        this.show(null);
        await this.load();
      },
    });
  }

  async run() {
    const d = this.draft;
    try {
      const res = await api('POST', autoPath(d.id, '/run'), { input: this.runInput });
      this.openRun = res.run_id;
      await this.loadRuns();
    } catch (err) {
      this.app.fail(err, 'Run');
    }
  }

  async fork(runId) {
    try {
      const res = await api('POST', autoPath(this.draft.id, `/runs/${encodeURIComponent(runId)}/fork`), {});
      this.openRun = res.run_id;
      await this.loadRuns();
    } catch (err) {
      this.app.fail(err, 'Fork');
    }
  }

  async answer(it, cancel) {
    const key = `${it.run_id}/${it.node_id}`;
    const rest = `/runs/${encodeURIComponent(it.run_id)}/nodes/${encodeURIComponent(it.node_id)}/${cancel ? 'cancel' : 'resume'}`;
    try {
      await api('POST', autoPath(it.automation_id, rest), cancel ? {} : { value: this.values.get(key) || '' });
      this.values.delete(key);
    } catch (err) {
      // 409: someone else answered it first; the re-read drops the prompt.
      if (err.status !== 409) this.app.fail(err, cancel ? 'Cancel' : 'Resume');
    }
    this.loadInterrupts();
  }

  async create() {
    const c = this.creating;
    const folder = this.currentFolder();
    this.draft = { ...starterAutomation(c.id.trim(), c.name.trim() || c.id.trim(), folder), _saved: false };
    this.creating = null;
    this.dirty = true;
    await this.save();
  }

  currentFolder() {
    return this.draft?.folder ?? null;
  }

  async createFolder() {
    try {
      await api('POST', '/api/automation-folders', { path: this.folderForm.path.trim() });
      this.folderForm = null;
      await this.load();
    } catch (err) {
      this.app.fail(err, 'New folder');
    }
  }

  async renameFolder(f) {
    const to = prompt(`Rename or move the folder ${f.path} to:`, f.path);
    if (!to || to === f.path) return;
    try {
      await api('PATCH', '/api/automation-folders', { old_path: f.path, new_path: to });
      await this.load();
    } catch (err) {
      this.app.fail(err, 'Rename the folder');
    }
  }

  async deleteFolder(f) {
    this.app.dialogs.confirm({
      title: `Delete the folder ${f.path}?`,
      body: html`<p>Only the folder goes: the Automations and folders it holds move up to its parent.</p>`,
      label: 'Delete folder',
      action: async () => {
        await api('DELETE', `/api/automation-folders?path=${encodeURIComponent(f.path)}&keep_contents=true`);
        await this.load();
      },
    });
  }

  selectNode(id) {
    this.selectedNode = id;
    const n = this.draft?.nodes.find((x) => x.id === id);
    this.nodeText = n ? JSON.stringify(n, null, 2) : '';
    this.app.update();
  }

  applyNode() {
    let n;
    try {
      n = JSON.parse(this.nodeText);
    } catch (err) {
      this.error = { message: `node JSON: ${err.message}`, node: this.selectedNode };
      this.app.update();
      return;
    }
    this.edit((d) => {
      const i = d.nodes.findIndex((x) => x.id === this.selectedNode);
      if (i >= 0) {
        // A node's place on the canvas stays unless the JSON names one.
        if (!n.position && d.nodes[i].position) n.position = d.nodes[i].position;
        if (n.id !== this.selectedNode) {
          for (const e of d.edges) {
            if (e.from === this.selectedNode) e.from = n.id;
            if (e.to === this.selectedNode) e.to = n.id;
          }
        }
        d.nodes[i] = n;
      }
    });
    if (this.error?.node === this.selectedNode) this.error = null;
    this.selectedNode = n.id;
  }

  addNode(kind) {
    this.edit((d) => {
      const n = nodeTemplate(kind, d.nodes, this.tools, this.app.ui.agents);
      d.nodes.push(n);
      this.selectNode(n.id);
    });
  }

  graphEdit(detail) {
    this.edit((d) => applyEdit(d, detail));
  }
}

// ---------------------------------------------------------------------------
// Views

/** interruptsView shows the pending Interrupts, each with Resume and Cancel. */
export function interruptsView(app) {
  const a = app.automations;
  if (!a.interrupts.length) return nothing;
  return html`<section class="interrupts" aria-label="Interrupts awaiting an answer">
    ${repeat(a.interrupts, (it) => `${it.run_id}/${it.node_id}`, (it) => {
      const key = `${it.run_id}/${it.node_id}`;
      return html`<div class="interrupt" role="group" aria-label="Interrupt ${it.node_id} of ${it.automation_id}">
        <div class="interrupt-head"><span class="badge st-awaiting_approval"><span class="dot" aria-hidden="true">?</span>waiting</span>
          <a href="#/automations/${encodeURIComponent(it.automation_id)}">${it.automation_id}</a> · <code>${it.node_id}</code></div>
        <pre class="interrupt-prompt">${typeof it.prompt === 'string' ? it.prompt : JSON.stringify(it.prompt)}</pre>
        <label class="sr-only" for="iv-${key}">Answer</label>
        <textarea id="iv-${key}" rows="2" placeholder="Your answer" aria-label="Answer to ${it.node_id}"
          .value=${live(a.values.get(key) || '')} @input=${(e) => a.values.set(key, e.target.value)}></textarea>
        <div class="row">
          <button class="primary" @click=${() => a.answer(it, false)}>Resume</button>
          <button @click=${() => a.answer(it, true)}>Cancel</button>
        </div>
      </div>`;
    })}
  </section>`;
}

export function automationsView(app) {
  const a = app.automations;
  return html`<section class="automations" aria-label="Automations">
    <nav class="auto-tree" aria-label="Automation folders">
      <div class="row">
        <button @click=${() => { a.creating = { id: '', name: '' }; app.update(); }}>+ Automation</button>
        <button @click=${() => { a.folderForm = { path: '' }; app.update(); }}>+ Folder</button>
      </div>
      ${a.creating ? createForm(app) : nothing}
      ${a.folderForm ? folderFormView(app) : nothing}
      ${a.list === null ? html`<p class="muted">Loading…</p>` : treeView(app, folderTree(a.folders, a.list), 0)}
    </nav>
    <div class="auto-editor">${a.draft ? editorView(app, a.draft) : html`<div class="empty"><p>Choose an Automation, or make one.</p></div>`}</div>
  </section>`;
}

function createForm(app) {
  const a = app.automations;
  const c = a.creating;
  return html`<form class="auto-create" aria-label="New Automation" @submit=${(e) => { e.preventDefault(); a.create(); }}>
    <label>ID <input name="id" required .value=${live(c.id)} @input=${(e) => { c.id = e.target.value; }}></label>
    <label>Name <input name="name" .value=${live(c.name)} @input=${(e) => { c.name = e.target.value; }}></label>
    <div class="row"><button class="primary" type="submit">Create</button>
      <button type="button" @click=${() => { a.creating = null; app.update(); }}>Cancel</button></div>
  </form>`;
}

function folderFormView(app) {
  const a = app.automations;
  return html`<form class="auto-create" aria-label="New folder" @submit=${(e) => { e.preventDefault(); a.createFolder(); }}>
    <label>Folder path <input name="path" required placeholder="ops/daily" .value=${live(a.folderForm.path)} @input=${(e) => { a.folderForm.path = e.target.value; }}></label>
    <div class="row"><button class="primary" type="submit">Create folder</button>
      <button type="button" @click=${() => { a.folderForm = null; app.update(); }}>Cancel</button></div>
  </form>`;
}

function treeView(app, node, depth) {
  const a = app.automations;
  return html`<ul class="auto-folder" role=${depth ? 'group' : 'tree'} aria-label=${depth ? nothing : 'Automations'}>
    ${node.folders.map((f) => html`<li role="treeitem" aria-expanded="true" class="folder">
      <div class="folder-head"><span aria-hidden="true">▾</span> <span class="folder-name">${f.name}</span>
        <button class="icon" aria-label="Rename folder ${f.path}" title="Rename or move" @click=${() => a.renameFolder(f)}>✎</button>
        <button class="icon" aria-label="Delete folder ${f.path}" title="Delete (contents move up)" @click=${() => a.deleteFolder(f)}>×</button></div>
      ${treeView(app, f, depth + 1)}
    </li>`)}
    ${node.automations.map((r) => html`<li role="treeitem" class="automation-item">
      <a href="#/automations/${encodeURIComponent(r.id)}" aria-current=${a.draft?.id === r.id ? 'page' : 'false'}>
        <span class="dot ${r.enabled ? 'st-ready' : 'st-closed'}" aria-hidden="true">${r.enabled ? '●' : '–'}</span>${r.name}
        <span class="muted small">${r.trigger.kind}</span></a></li>`)}
  </ul>`;
}

function editorView(app, d) {
  const a = app.automations;
  const err = a.error;
  const run = a.runs.find((r) => r.run_id === a.openRun);
  return html`
    <header class="auto-head">
      <label>Name <input aria-label="Automation name" .value=${live(d.name)} @input=${(e) => a.edit((x) => { x.name = e.target.value; })}></label>
      <label>Folder <input aria-label="Folder" placeholder="(root)" .value=${live(d.folder ?? '')} @change=${(e) => a.edit((x) => { x.folder = e.target.value.trim() || null; })}></label>
      <label class="check"><input type="checkbox" .checked=${live(d.enabled)} @change=${(e) => a.edit((x) => { x.enabled = e.target.checked; })}> Enabled</label>
      <button class="primary" ?disabled=${!a.dirty} @click=${() => a.save()}>Save</button>
      <button @click=${() => a.remove()} ?disabled=${!d._saved}>Delete</button>
      ${a.dirty ? html`<span class="muted small">unsaved</span>` : nothing}
    </header>
    ${err ? html`<div class="banner error" role="alert">${err.message}</div>` : nothing}
    ${triggerView(app, d)}
    <div class="auto-graph">
      <lathe-graph aria-label="Graph of ${d.name}" .editable=${true} .graph=${graphOf(d, err, run)}
        @graph-edit=${(e) => a.graphEdit(e.detail)} @node-select=${(e) => e.detail.id && a.selectNode(e.detail.id)}></lathe-graph>
    </div>
    <div class="auto-tools row">
      <label>Add a node <select aria-label="Node kind" id="auto-add-kind">
        ${['agent', 'tool', 'conditional', 'map', 'subgraph', 'text_input', 'interrupt'].map((k) => html`<option>${k}</option>`)}
      </select></label>
      <button @click=${(e) => a.addNode(e.target.closest('.auto-tools').querySelector('select').value)}>Add</button>
    </div>
    ${a.selectedNode ? nodeFormView(app) : nothing}
    ${edgesView(app, d)}
    ${d._saved ? runView(app, d, run) : nothing}`;
}

function triggerView(app, d) {
  const a = app.automations;
  const t = d.trigger;
  const set = (k) => (e) => a.edit((x) => { x.trigger = { ...x.trigger, [k]: e.target.value }; });
  return html`<fieldset class="auto-trigger"><legend>Trigger</legend>
    <label>Kind <select aria-label="Trigger kind" .value=${live(t.kind)} @change=${(e) => a.edit((x) => { x.trigger = { kind: e.target.value }; })}>
      ${['manual', 'schedule', 'on_event', 'on_skill'].map((k) => html`<option ?selected=${k === t.kind}>${k}</option>`)}
    </select></label>
    ${t.kind === 'schedule' ? html`<label>Every <input aria-label="Every" placeholder="5m" .value=${live(t.every || '')} @input=${set('every')}></label>` : nothing}
    ${t.kind === 'on_event' ? html`<label>Event <input aria-label="Event type" .value=${live(t.event || '')} @input=${set('event')}></label>` : nothing}
    ${t.kind === 'on_skill' ? html`<label>Skill <input aria-label="Skill ID" .value=${live(t.skill_id || '')} @input=${set('skill_id')}></label>` : nothing}
    ${t.kind !== 'manual' && t.kind !== 'on_skill' ? html`<label>Input <input aria-label="Trigger input" .value=${live(t.input || '')} @input=${set('input')}></label>` : nothing}
  </fieldset>`;
}

/** nodeFields is the node's form: the fields of its kind, template hints and each field's problem in words. */
function nodeFields(app, a) {
  let n;
  try {
    n = JSON.parse(a.nodeText);
  } catch {
    return html`<p class="error-text small" role="alert">⚠ The raw JSON does not parse; fix it below.</p>`;
  }
  const fields = NODE_FIELDS[n.kind] || [];
  const nodes = a.draft?.nodes || [];
  const put = (key, v) => { n[key] = v; a.nodeText = JSON.stringify(n, null, 2); app.update(); };
  const control = (f) => {
    const v = n[f.key];
    switch (f.type) {
      case 'area':
        return html`<textarea rows="3" spellcheck="false" aria-label=${f.label} .value=${live(v ?? '')} @input=${(e) => put(f.key, e.target.value)}></textarea>`;
      case 'agent':
        return html`<select aria-label=${f.label} .value=${live(v ?? '')} @change=${(e) => put(f.key, e.target.value)}>
          ${app.ui.agents.map((g) => html`<option value=${g.agent_id} ?selected=${g.agent_id === v}>${g.name || g.agent_id}</option>`)}</select>`;
      case 'tool':
        return html`<select aria-label=${f.label} .value=${live(v ?? '')} @change=${(e) => put(f.key, e.target.value)}>
          ${[...new Set([...(a.tools || []), ...(v ? [v] : [])])].map((t) => html`<option value=${t} ?selected=${t === v}>${t}</option>`)}</select>`;
      case 'node':
        return html`<select aria-label=${f.label} .value=${live(v ?? '')} @change=${(e) => put(f.key, e.target.value)}>
          <option value="">(none)</option>${nodes.filter((x) => x.id !== n.id).map((x) => html`<option value=${x.id} ?selected=${x.id === v}>${x.id}</option>`)}</select>`;
      case 'choice':
        return html`<select aria-label=${f.label} .value=${live(v ?? '')} @change=${(e) => put(f.key, e.target.value)}>
          ${f.choices.map(([c, words]) => html`<option value=${c} ?selected=${c === v}>${words}</option>`)}</select>`;
      case 'check':
        return html`<input type="checkbox" aria-label=${f.label} .checked=${live(!!v)} @change=${(e) => put(f.key, e.target.checked)}>`;
      default:
        return html`<input aria-label=${f.label} .value=${live(v ?? '')} @input=${(e) => put(f.key, e.target.value)}>`;
    }
  };
  return html`<div class="node-fields">
    <p class="small muted">A ${n.kind} node${n.kind === 'conditional' ? '; its branches are edited in the raw JSON' : ''}.</p>
    ${fields.map((f) => {
      const problem = fieldProblem(f, n[f.key], nodes, n.id);
      return html`<div class="node-field"><label>${f.label} ${control(f)}</label>
        ${f.template ? html`<p class="small muted">Templates: ${TEMPLATE_HINTS.map((t) => html`<code>${t}</code> `)}</p>` : nothing}
        ${problem ? html`<p class="error-text small" role="alert">⚠ ${problem}</p>` : nothing}</div>`;
    })}
  </div>`;
}

function nodeFormView(app) {
  const a = app.automations;
  return html`<div class="auto-node" role="group" aria-label="Node ${a.selectedNode}">
    <b>Node <code>${a.selectedNode}</code></b>
    ${nodeFields(app, a)}
    <details class="node-raw"><summary>Raw JSON</summary>
      <textarea aria-label="Node JSON" rows="8" spellcheck="false" .value=${live(a.nodeText)} @input=${(e) => { a.nodeText = e.target.value; app.update(); }}></textarea></details>
    <div class="row">
      <button @click=${() => a.applyNode()}>Apply</button>
      <button @click=${() => { a.edit((d) => { d.nodes = d.nodes.filter((n) => n.id !== a.selectedNode); d.edges = d.edges.filter((e) => e.from !== a.selectedNode && e.to !== a.selectedNode); }); a.selectedNode = null; app.update(); }}>Remove node</button>
      <button @click=${() => { a.selectedNode = null; app.update(); }}>Close</button>
    </div>
  </div>`;
}

function edgesView(app, d) {
  const a = app.automations;
  const kind = new Map(d.nodes.map((n) => [n.id, n]));
  if (!d.edges.length) return nothing;
  return html`<details class="auto-edges"><summary>Edges (${d.edges.length})</summary><ul>
    ${d.edges.map((e, i) => html`<li>${e.from} → ${e.to}
      ${kind.get(e.from)?.kind === 'conditional'
        ? html`<label>branch <select aria-label="Branch of ${e.from} to ${e.to}" @change=${(ev) => a.edit((x) => { x.edges[i] = { ...x.edges[i], branch: ev.target.value || undefined }; })}>
            ${['', ...(kind.get(e.from).branches || []).map((b) => b.name), 'default'].map((b) => html`<option value=${b} ?selected=${(e.branch || '') === b}>${b || '(any)'}</option>`)}
          </select></label>`
        : nothing}</li>`)}
  </ul></details>`;
}

function runView(app, d, run) {
  const a = app.automations;
  return html`<section class="auto-runs" aria-label="Runs">
    <div class="row">
      <label>Input <input aria-label="Run input" .value=${live(a.runInput)} @input=${(e) => { a.runInput = e.target.value; }}></label>
      <button class="primary" ?disabled=${!d.enabled || a.dirty} title=${a.dirty ? 'Save first' : ''} @click=${() => a.run()}>Run</button>
    </div>
    <h3>History</h3>
    ${a.runs.length ? nothing : html`<p class="muted">No runs yet.</p>`}
    <ol class="run-list" aria-label="Run history">
      ${repeat(a.runs, (r) => r.run_id, (r) => html`<li>
        <button class="link" aria-pressed=${r.run_id === a.openRun ? 'true' : 'false'} @click=${() => { a.openRun = r.run_id; app.update(); }}>
          <span class="badge run-state" data-state=${r.state}>${r.state}</span> ${runSummary(r)}</button></li>`)}
    </ol>
    ${run ? html`<div class="run-detail" role="group" aria-label="Run ${run.run_id}">
      <div class="row"><span>Run <code>${run.run_id}</code>: <strong class="run-state" data-state=${run.state}>${run.state}</strong> · ${usageWords(run.usage)}</span>
        <button @click=${() => a.fork(run.run_id)}>Fork</button></div>
      ${run.error ? html`<div class="banner error">${run.error}</div>` : nothing}
      ${run.output ? html`<div class="run-output" role="region" aria-label="Run output">${typeof run.output === 'string' ? answerView(app, mdPart(run.output)) : html`<pre>${JSON.stringify(run.output, null, 2)}</pre>`}</div>` : nothing}
      <table class="run-nodes"><thead><tr><th>Node</th><th>State</th><th>Output</th><th>Usage</th></tr></thead><tbody>
        ${Object.entries(run.nodes).sort(([x], [y]) => x.localeCompare(y)).map(([k, n]) => html`<tr data-node=${k}>
          <td><code>${k}</code></td><td><span class="run-state" data-state=${n.state}>${n.state}</span></td>
          <td>${n.error ? html`<pre class="error-text">${n.error}</pre>`
            : typeof n.output === 'string' ? answerView(app, mdPart(n.output)) : n.output ? html`<pre>${JSON.stringify(n.output, null, 2)}</pre>` : nothing}</td>
          <td>${n.usage ? usageWords(n.usage) : ''}</td></tr>`)}
      </tbody></table>
    </div>` : nothing}
  </section>`;
}

export { emptyAutomation };
