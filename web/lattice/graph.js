// <lathe-graph>: a reusable graph of nodes and edges, drawn by the vendored
// Drawflow node editor. Give it
//
//   el.graph = { nodes: [{id, label, kind?, detail?, state?, error?, x?, y?}],
//                edges: [{from, to, label?}] }
//   el.editable = true | false   (false: read-only, nodes fixed, no new edges)
//
// and it draws each node as a box with one input and one output, each edge
// as a connection. Nodes without a position are laid out in columns by
// their depth along the edges. A node's state (pending, running, waiting,
// succeeded, failed, skipped) and error (a validation message) show on it.
//
// Events (bubbling, composed):
//   graph-edit    detail {nodes: [{id, x, y}], edges: [{from, to}]}: an edge
//                 was drawn or removed, a node moved or was deleted
//   node-select   detail {id} (or {id: null} when nothing is selected)
//
// The Automations view edits Automation graphs with it; a Lattice plan can
// draw its subtasks read-only with it.

import { layout } from './layout.js';

const STYLE_ID = 'lathe-graph-drawflow-css';
let drawflowModule;

function loadDrawflow() {
  if (!document.getElementById(STYLE_ID)) {
    const link = document.createElement('link');
    link.id = STYLE_ID;
    link.rel = 'stylesheet';
    link.href = '/vendor/drawflow.css';
    document.head.append(link);
  }
  drawflowModule ??= import('/vendor/drawflow.js');
  return drawflowModule;
}

const esc = (s) => String(s ?? '').replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);

class LatheGraph extends HTMLElement {
  constructor() {
    super();
    this._graph = { nodes: [], edges: [] };
    this._editable = false;
    this._editor = null;
    this._ids = new Map(); // our id → drawflow id
    this._names = new Map(); // drawflow id → our id
    this._drawing = false;
  }

  set graph(g) {
    const next = { nodes: g?.nodes || [], edges: g?.edges || [] };
    const key = JSON.stringify(next);
    if (key === this._key) return; // the same graph: keep the drawing (and a drag under way)
    this._key = key;
    this._graph = next;
    this.draw();
  }

  get graph() {
    return this._graph;
  }

  set editable(v) {
    this._editable = !!v;
    if (this._editor) this._editor.editor_mode = this._editable ? 'edit' : 'view';
  }

  get editable() {
    return this._editable;
  }

  connectedCallback() {
    this.classList.add('lathe-graph');
    this.setAttribute('role', 'group');
    if (!this.hasAttribute('aria-label')) this.setAttribute('aria-label', 'Graph');
    this.draw();
  }

  async ensureEditor() {
    if (this._editor) return this._editor;
    const { Drawflow } = await loadDrawflow();
    if (this._editor) return this._editor;
    const canvas = document.createElement('div');
    canvas.className = 'lathe-graph-canvas';
    this.replaceChildren(canvas);
    const ed = new Drawflow(canvas);
    ed.reroute = false;
    ed.curvature = 0.35;
    ed.editor_mode = this._editable ? 'edit' : 'view';
    ed.start();
    const edited = () => { if (!this._drawing) this.emitEdit(); };
    ed.on('connectionCreated', edited);
    ed.on('connectionRemoved', edited);
    ed.on('nodeMoved', edited);
    ed.on('nodeRemoved', (id) => {
      const name = this._names.get(String(id));
      this._names.delete(String(id));
      if (name) this._ids.delete(name);
      edited();
    });
    ed.on('nodeSelected', (id) => this.dispatchEvent(new CustomEvent('node-select', { bubbles: true, composed: true, detail: { id: this._names.get(String(id)) ?? null } })));
    ed.on('nodeUnselected', () => this.dispatchEvent(new CustomEvent('node-select', { bubbles: true, composed: true, detail: { id: null } })));
    this._editor = ed;
    return ed;
  }

  /** draw replaces the drawing with the current graph. */
  async draw() {
    if (!this.isConnected) return;
    const ed = await this.ensureEditor();
    this._drawing = true;
    try {
      ed.clear();
      this._ids.clear();
      this._names.clear();
      const nodes = layout(this._graph.nodes, this._graph.edges);
      for (const n of nodes) {
        const cls = ['lg-node', n.kind ? `kind-${n.kind}` : '', n.state ? `st-${n.state}` : '', n.error ? 'has-error' : ''].filter(Boolean).join(' ');
        const body = `<div class="lg-title"><span class="lg-id">${esc(n.label ?? n.id)}</span>${n.kind ? `<span class="lg-kind">${esc(n.kind)}</span>` : ''}</div>`
          + (n.detail ? `<div class="lg-detail">${esc(n.detail)}</div>` : '')
          + (n.state ? `<div class="lg-state" data-state="${esc(n.state)}">${esc(n.state)}</div>` : '')
          + (n.error ? `<div class="lg-error" role="alert">${esc(n.error)}</div>` : '');
        const id = ed.addNode(n.id, 1, 1, n.x, n.y, cls, { id: n.id }, body);
        this._ids.set(n.id, String(id));
        this._names.set(String(id), n.id);
        const el = this.querySelector(`#node-${id}`);
        if (el) {
          el.dataset.node = n.id;
          el.setAttribute('aria-label', `${n.label ?? n.id}${n.kind ? `, ${n.kind}` : ''}${n.state ? `, ${n.state}` : ''}${n.error ? `, error: ${n.error}` : ''}`);
        }
      }
      for (const e of this._graph.edges) {
        const a = this._ids.get(e.from);
        const b = this._ids.get(e.to);
        if (a && b) ed.addConnection(a, b, 'output_1', 'input_1');
      }
      for (const e of this._graph.edges) {
        if (!e.label) continue;
        const a = this._ids.get(e.from);
        const b = this._ids.get(e.to);
        const path = this.querySelector(`.connection.node_in_node-${b}.node_out_node-${a}`);
        if (path) path.dataset.label = e.label;
      }
    } finally {
      this._drawing = false;
    }
  }

  /** snapshot reads the drawn nodes' positions and the edges. */
  snapshot() {
    const ed = this._editor;
    if (!ed) return { nodes: [], edges: [] };
    const data = ed.export().drawflow[ed.module]?.data || {};
    const nodes = [];
    const edges = [];
    for (const [dfId, n] of Object.entries(data)) {
      const id = this._names.get(String(dfId));
      if (!id) continue;
      nodes.push({ id, x: Math.round(n.pos_x), y: Math.round(n.pos_y) });
      for (const out of Object.values(n.outputs || {})) {
        for (const c of out.connections || []) {
          const to = this._names.get(String(c.node));
          if (to) edges.push({ from: id, to });
        }
      }
    }
    return { nodes, edges };
  }

  emitEdit() {
    this.dispatchEvent(new CustomEvent('graph-edit', { bubbles: true, composed: true, detail: this.snapshot() }));
  }
}

if (!customElements.get('lathe-graph')) customElements.define('lathe-graph', LatheGraph);
