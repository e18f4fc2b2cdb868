// The centre of the workbench: the Session header, the conversation and the
// composer. Turns go out as the /ws `session` command and come back as the
// turn frames (session-accepted, session-start, token, reasoning, tool-call,
// then exactly one of session-done, -cancelled or -error).

import { html, nothing, repeat, live, ref, guard } from '/vendor/lit.js';
import * as S from './store.js';
import { api, ApiError, path, sessionPath } from './api.js';
import { newID } from './util.js';
import { badge } from './rail.js';
import { isPreviewRef, previewLabel } from './refs.js';

/** Conversation owns the turn logs' loading and each Session's composer. */
export class Conversation {
  constructor(app) {
    this.app = app;
    this.composers = new Map(); // session id → {text, refs, model}
    this.loading = new Map(); // session id → generation of the last load
    this.scroller = null;
    this.stick = true; // keep the transcript scrolled to the end
    this.scrollRef = (el) => this.bindScroller(el);
    this.attachments = new Map(); // session id → {list, loading, error}
    this.models = new Map(); // agent id → {list, error}
    this.search = { q: '', hits: null, error: '', busy: false };
    this.focusTurn = null; // a turn to scroll to once it is rendered (a search hit)
  }

  /** rewind hides every turn after turnId (the caller confirmed); a refusal throws. */
  async rewind(id, turnId) {
    const r = await api('POST', sessionPath(id, '/rewind'), { keep_through_turn_id: turnId });
    S.loadTurns(this.app.state, id, r.turns || []);
    this.app.update();
  }

  /** find searches every Session's turns for the query as typed. */
  async find(q) {
    const se = this.search;
    se.q = q;
    if (!q.trim()) {
      se.hits = null;
      this.app.update();
      return;
    }
    se.busy = true;
    this.app.update();
    try {
      const r = await api('GET', path('/api/session-turns/search', { q, limit: 20 }));
      if (se.q !== q) return;
      se.hits = r.hits || [];
      se.error = '';
    } catch (err) {
      if (se.q !== q) return;
      se.hits = null;
      se.error = err.message;
    } finally {
      if (se.q === q) se.busy = false;
      this.app.update();
    }
  }

  /** jump opens a search hit's Session and scrolls to its turn. */
  jump(hit) {
    this.search.hits = null;
    this.focusTurn = hit.turn_id;
    this.stick = false;
    if (this.app.ui.route.session !== hit.session_id) this.app.openSession(hit.session_id);
    this.app.update();
  }

  /** loadAttachments re-reads the Session's active composer attachments. */
  async loadAttachments(id) {
    const a = this.attachments.get(id) || { list: [] };
    this.attachments.set(id, a);
    try {
      a.list = await api('GET', sessionPath(id, '/attachments'));
      a.error = '';
    } catch (err) {
      a.error = err.message;
    }
    this.app.update();
  }

  /** attach uploads files as this-turn attachments of a Session. */
  async attach(id, files) {
    const a = this.attachments.get(id) || { list: [] };
    this.attachments.set(id, a);
    a.loading = true;
    this.app.update();
    for (const file of files) {
      const form = new FormData();
      form.append('file', file, file.name);
      try {
        await api('POST', path(sessionPath(id, '/attachments'), { scope: 'this_turn' }), form);
      } catch (err) {
        this.app.fail(err, `Attaching ${file.name}`);
      }
    }
    a.loading = false;
    await this.loadAttachments(id);
  }

  /** setScope keeps an attachment for the whole Session, or for the next turn only. */
  async setScope(id, ref, scope) {
    try {
      await api('PATCH', sessionPath(id, `/attachments/${encodeURIComponent(ref)}`), { scope });
    } catch (err) {
      this.app.fail(err, 'Attachment');
    }
    await this.loadAttachments(id);
  }

  /** detach removes an attachment from future turns (turns that used it keep it). */
  async detach(id, ref) {
    try {
      await api('DELETE', sessionPath(id, `/attachments/${encodeURIComponent(ref)}`));
    } catch (err) {
      this.app.fail(err, 'Attachment');
    }
    await this.loadAttachments(id);
  }

  /** modelList returns (loading once) the models an Agent can use for one turn. */
  modelList(agentId) {
    if (!agentId) return null;
    let m = this.models.get(agentId);
    if (!m) {
      m = { list: [] };
      this.models.set(agentId, m);
      api('GET', path('/api/llm/models', { agent: agentId }))
        .then((r) => { m.list = r.models.map((x) => x.name); })
        .catch((err) => {
          m.list = err.body?.models?.map((x) => x.name) || [];
          m.error = err.message;
        })
        .finally(() => this.app.update());
    }
    return m;
  }

  composer(id) {
    let c = this.composers.get(id);
    if (!c) {
      c = { text: '', refs: [], model: '' };
      this.composers.set(id, c);
    }
    return c;
  }

  /** load re-reads a Session's durable turns and (unless told not to) its attachments. */
  async load(id, { attachments = true } = {}) {
    if (attachments) this.loadAttachments(id);
    const n = (this.loading.get(id) || 0) + 1;
    this.loading.set(id, n);
    const log = S.turnLog(this.app.state, id);
    try {
      const turns = await api('GET', sessionPath(id, '/turns'));
      if (this.loading.get(id) !== n) return;
      S.loadTurns(this.app.state, id, Array.isArray(turns) ? turns : turns?.turns || []);
    } catch (err) {
      if (this.loading.get(id) !== n) return;
      log.loaded = true;
      // A daemon without the turns route answers "no route": its history is
      // simply not available yet, which is not an error of this Session.
      log.error = err instanceof ApiError && err.status === 404 && /no route/.test(err.message) ? '' : err.message;
      if (err instanceof ApiError && err.status === 401) this.app.fail(err);
    }
    this.app.update();
  }

  /** addReference puts a context reference on the composer of a Session. */
  addReference(id, reference) {
    const c = this.composer(id);
    c.refs = [...c.refs, reference];
    this.app.update();
    requestAnimationFrame(() => document.getElementById('composer-input')?.focus());
  }

  /** send sends the composer's text as a turn; it reports whether it did. */
  send(id) {
    const app = this.app;
    const c = this.composer(id);
    const text = c.text.trim();
    if (!text || S.activeTurn(app.state, id)) return false;
    const turnId = newID();
    const cmd = {
      cmd: 'session',
      id,
      input: S.renderInput(text, c.refs),
      display_input: text,
      context_references: c.refs,
      turn_id: turnId,
      idempotency_key: turnId,
    };
    if (c.model) cmd.model_override = c.model;
    const att = this.attachments.get(id)?.list || [];
    if (att.length) cmd.reference_ids = att.map((a) => a.reference_id);
    S.beginTurn(app.state, id, cmd);
    app.live.send(cmd); // if the socket is down, it is sent after the reconnect
    c.text = '';
    c.refs = [];
    c.model = ''; // the override is for one turn
    this.stick = true;
    app.update();
    return true;
  }

  /** stop asks the running turn of a Session to stop; it reports whether one runs. */
  stop(id) {
    if (!id) return false;
    const t = S.activeTurn(this.app.state, id);
    if (!t || t.status === 'sending') return false;
    this.app.live.send({ cmd: 'session-stop', id, turn_id: t.turn_id });
    t.notice = 'Stopping at the next safe boundary…';
    t.rev++;
    this.app.update();
    return true;
  }

  onScroll(el) {
    this.stick = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
  }

  bindScroller(el) {
    this.scroller = el || null;
  }

  /** follow keeps the transcript at its end while the user has not scrolled up. */
  follow() {
    const el = this.scroller;
    if (this.focusTurn && el) {
      const li = el.querySelector(`[data-turn="${CSS.escape(this.focusTurn)}"]`);
      if (li) {
        this.focusTurn = null;
        for (const x of el.querySelectorAll('.turn.found')) x.classList.remove('found');
        li.classList.add('found');
        li.scrollIntoView({ block: 'start' });
        li.focus({ preventScroll: true });
      }
      return;
    }
    if (el && this.stick) el.scrollTop = el.scrollHeight;
  }
}

// ---------------------------------------------------------------------------
// Views

export function sessionView(app, s) {
  const agent = s.mode.kind === 'single_agent' ? app.ui.agents.find((a) => a.agent_id === s.mode.agent_id) : null;
  const tokens = S.sessionTokens(app.state, s.id);
  const closed = s.status === 'closed';
  const tool = app.ui.inspector;
  return html`<header class="session-head">
      <button class="icon menu-btn" aria-label="Open the rail" @click=${() => app.toggleRail()}>☰</button>
      <h1 class="session-title" title=${s.working_dir}>${s.name}</h1>
      ${badge(S.sessionBadge(app.state, s), 'env-badge')}
      <span class="meta">${s.mode.kind === 'single_agent' ? html`Agent <b>${agent ? agent.name || agent.agent_id : s.mode.agent_id}</b>` : 'Lattice'}</span>
      ${tokens.any ? html`<span class="meta session-usage" title="Usage of the turns in this conversation (rewound turns are not counted)">${usageText(tokens)}</span>` : nothing}
      <span class="spacer"></span>
      <div class="tool-tabs" role="group" aria-label="Tools">
        <button aria-pressed=${tool === 'files' ? 'true' : 'false'} @click=${() => app.showTool('files')}>Files</button>
        <button aria-pressed=${tool === 'environment' ? 'true' : 'false'} @click=${() => app.showTool('environment')}>Environment</button>
        <button aria-pressed=${tool === 'git' ? 'true' : 'false'} @click=${() => app.showTool('git')}>Source Control</button>
        <button aria-pressed=${tool === 'preview' ? 'true' : 'false'} @click=${() => app.showTool('preview')}>Preview</button>
        <button aria-pressed=${app.ui.dockOpen ? 'true' : 'false'} @click=${() => app.toggleDock()}>Terminal</button>
      </div>
      ${closed ? html`<button @click=${() => app.dialogs.reopen(s.id)}>Reopen</button>` : nothing}
      <button class="icon" aria-label="Session actions" title="Rename, close or delete"
        @click=${() => app.dialogs.open('session-actions', { session: s.id })}>⋯</button>
    </header>
    ${closed ? html`<div class="banner" role="status">This Session is closed. Its history stays; reopen it to work in it again.</div>` : nothing}
    <div class="conv-bar">
      ${searchView(app)}
      <span class="spacer"></span>
      <span class="export" role="group" aria-label="Export the conversation">Export
        <a href=${path(sessionPath(s.id, '/export'), { format: 'markdown' })} download>Markdown</a>
        <a href=${path(sessionPath(s.id, '/export'), { format: 'json' })} download>JSON</a></span>
    </div>
    ${transcriptView(app, s)}
    ${composerView(app, s)}`;
}

function transcriptView(app, s) {
  const conv = app.conversation;
  const log = app.state.turns.get(s.id);
  const turns = log ? log.turns : [];
  return html`<section class="transcript" aria-label="Conversation" tabindex="-1"
      ${ref(conv.scrollRef)} @scroll=${(e) => conv.onScroll(e.target)}>
    ${log?.error ? html`<p class="banner error" role="alert">Could not load the conversation: ${log.error}
      <button class="link" @click=${() => conv.load(s.id)}>Retry</button></p>` : nothing}
    ${!turns.length && log?.loaded && !log.error
      ? html`<div class="empty small"><p>No turns yet. Ask the Agent for something below; select code in a file and
          add it as a reference to give it context.</p></div>`
      : nothing}
    <ol class="turns" aria-live="off">
      ${repeat(turns, (t) => t.turn_id, (t) => guard([t, t.rev, turns.at(-1) === t], () => turnView(app, s, t, turns.at(-1) === t)))}
    </ol>
  </section>`;
}

const STATUS = {
  sending: 'Sending…',
  accepted: 'Accepted',
  running: 'Working…',
  done: 'Done',
  cancelled: 'Stopped',
  error: 'Failed',
  failed: 'Not sent',
  stale: 'Ended while offline; reloading…',
};

/** usageText is "1,234 tokens · $0.01", each "at least" when only a subtotal is known. */
function usageText(tok) {
  const cost = S.formatCost(tok);
  return cost ? `${S.formatTokens(tok)} · ${cost}` : S.formatTokens(tok);
}

function turnView(app, s, t, last) {
  const ended = t.status === 'done' || t.status === 'cancelled' || t.status === 'error';
  const tok = t.tokens;
  return html`<li class="turn ts-${t.status}" data-turn=${t.turn_id} tabindex="-1">
    <div class="user-turn">
      <div class="who">You${t.model ? html` <span class="muted small">· model ${t.model}</span>` : nothing}</div>
      <div class="text">${t.display_input}</div>
      ${t.context.length ? html`<ul class="chips">${t.context.map((r) => html`<li class="chip" title=${r.text}>${refLabel(r)}</li>`)}</ul>` : nothing}
      ${t.attachments.length ? html`<p class="muted small turn-attachments">With ${t.attachments.length} attachment${t.attachments.length === 1 ? '' : 's'}</p>` : nothing}
    </div>
    <div class="agent-turn">
      <div class="who">Agent <span class="turn-status" data-status=${t.status}>${STATUS[t.status] || t.status}</span>
        ${ended && !last && s.status !== 'closed'
          ? html`<button type="button" class="link small rewind" title="Hide every later turn from the conversation and the model's history"
              @click=${() => app.dialogs.open('rewind', { session: s.id, turn: t.turn_id })}>Rewind to here…</button>`
          : nothing}</div>
      ${t.parts.map((p) => partView(p))}
      ${t.error ? html`<p class="error-text" role="alert">⚠ Error: ${t.error}</p>` : nothing}
      ${t.notice ? html`<p class="muted small">${t.notice}</p>` : nothing}
      ${tok ? html`<p class="turn-tokens muted small" title=${`input ${tok.input}, output ${tok.output}, reasoning ${tok.reasoning}`}>
        ${usageText(tok)} · in ${tok.input.toLocaleString('en-US')} · out ${tok.output.toLocaleString('en-US')}${tok.reasoning ? ` · reasoning ${tok.reasoning.toLocaleString('en-US')}` : ''}</p>` : nothing}
    </div>
  </li>`;
}

function partView(p) {
  switch (p.kind) {
    case 'reasoning':
      return html`<details class="reasoning"><summary>Reasoning (${p.text.length.toLocaleString('en-US')} characters)</summary><pre>${p.text}</pre></details>`;
    case 'text':
      return html`<div class="answer">${p.text}</div>`;
    default:
      return toolCard(p.tool);
  }
}

function toolCard(c) {
  const state = c.phase !== 'result' ? 'running' : c.is_error ? 'error' : 'ok';
  const mark = { running: '◌ running', error: '✕ failed', ok: '✓ done' }[state];
  const args = typeof c.arguments === 'string' ? prettyJSON(c.arguments) : JSON.stringify(c.arguments, null, 2);
  return html`<details class="tool-card tc-${state}" ?open=${state === 'error'} data-call=${c.call_id}>
    <summary><span class="tool-name">${c.name}</span> <span class="tool-state">${mark}</span>
      ${c.agent ? html`<span class="muted small">· ${c.agent}</span>` : nothing}
      ${c.occurrence > 1 ? html`<span class="muted small">· call ${c.call_id} #${c.occurrence}</span>` : nothing}</summary>
    ${args ? html`<div class="muted small">Arguments</div><pre class="tool-args">${args}</pre>` : nothing}
    ${state !== 'running' ? html`<div class="muted small">${state === 'error' ? 'Error result' : 'Result'}</div><pre class="tool-result">${c.result}</pre>` : nothing}
  </details>`;
}

/** prettyJSON indents a JSON text, or returns it as it is when it is not JSON. */
function prettyJSON(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

function searchView(app) {
  const conv = app.conversation;
  const se = conv.search;
  return html`<div class="turn-search">
    <label class="sr-only" for="turn-search">Search turns</label>
    <input id="turn-search" type="search" placeholder="Search turns…" .value=${live(se.q)}
      @input=${(e) => conv.find(e.target.value)}
      @keydown=${(e) => { if (e.key === 'Escape') { e.stopPropagation(); conv.find(''); } }}>
    ${se.error ? html`<p class="error-text small" role="alert">⚠ Search: ${se.error}</p>` : nothing}
    ${se.hits
      ? html`<ul class="search-hits" aria-label="Turns found">
          ${se.hits.length ? nothing : html`<li class="muted small">${se.busy ? 'Searching…' : 'No turn matches.'}</li>`}
          ${se.hits.map((h) => {
            const name = app.state.sessions.get(h.session_id)?.name || h.session_id;
            return html`<li><button type="button" class="link" @click=${() => conv.jump(h)}>
              <b>${name}</b> <span class="muted small">${h.field === 'input' ? 'you' : 'Agent'}:</span> ${h.snippet}</button></li>`;
          })}
        </ul>`
      : nothing}
  </div>`;
}

export function refLabel(r) {
  if (isPreviewRef(r)) return previewLabel(r);
  return r.start_line === r.end_line ? `${r.path}:${r.start_line}` : `${r.path}:${r.start_line}-${r.end_line}`;
}

function composerView(app, s) {
  const conv = app.conversation;
  const c = conv.composer(s.id);
  const running = S.activeTurn(app.state, s.id);
  const closed = s.status === 'closed';
  const offline = app.ui.conn.status !== 'live';
  const why = closed ? 'Reopen this Session to send.' : offline ? 'Offline: your message is sent when the connection is back.' : '';
  const onKey = (e) => {
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      conv.send(s.id);
    } else if (e.key === 'Escape' && running) {
      e.preventDefault();
      conv.stop(s.id);
    }
  };
  const att = conv.attachments.get(s.id);
  const models = s.mode.kind === 'single_agent' ? conv.modelList(s.mode.agent_id) : null;
  return html`<form class="composer" @submit=${(e) => { e.preventDefault(); conv.send(s.id); }}
      @dragover=${(e) => e.preventDefault()} @drop=${(e) => { e.preventDefault(); if (e.dataTransfer.files.length) conv.attach(s.id, [...e.dataTransfer.files]); }}>
    ${att?.list.length
      ? html`<ul class="chips" aria-label="Attachments">
          ${att.list.map((a) => html`<li class="chip attachment" title="${a.media_type}, ${a.size} bytes">${a.name}
            <span class="muted small">·</span><button type="button" class="link small" title="Change how long it is attached"
              @click=${() => conv.setScope(s.id, a.reference_id, a.scope === 'session' ? 'this_turn' : 'session')}>${a.scope === 'session' ? 'every turn' : 'next turn'}</button>
            <button type="button" class="icon" aria-label="Remove attachment ${a.name}" @click=${() => conv.detach(s.id, a.reference_id)}>×</button></li>`)}
        </ul>`
      : nothing}
    ${att?.error ? html`<p class="error-text small">⚠ Attachments: ${att.error}</p>` : nothing}
    ${c.refs.length
      ? html`<ul class="chips" aria-label="References">
          ${c.refs.map((r, i) => html`<li class="chip" title=${r.text}>${refLabel(r)}
            <button type="button" class="icon" aria-label="Remove reference ${refLabel(r)}"
              @click=${() => { c.refs = c.refs.filter((_, j) => j !== i); app.update(); }}>×</button></li>`)}
        </ul>`
      : nothing}
    <label for="composer-input" class="sr-only">Message to the Agent</label>
    <textarea id="composer-input" rows="3" placeholder="Ask the Agent… (Enter sends, Shift-Enter adds a line, Esc stops)"
      .value=${live(c.text)} ?disabled=${closed}
      @input=${(e) => { c.text = e.target.value; }} @keydown=${onKey}></textarea>
    <div class="composer-bar">
      <input id="attach-input" type="file" multiple hidden aria-label="Attach files"
        @change=${(e) => { conv.attach(s.id, [...e.target.files]); e.target.value = ''; }}>
      <button type="button" ?disabled=${closed || att?.loading} title="Attach files to the next turn (or drop them here)"
        @click=${() => document.getElementById('attach-input').click()}>${att?.loading ? 'Attaching…' : 'Attach…'}</button>
      ${models
        ? html`<label class="model"><span class="sr-only">Model for the next turn</span>
            <select .value=${live(c.model)} @change=${(e) => { c.model = e.target.value; }} title=${models.error || 'Model for the next turn'}>
              <option value="">Agent’s model</option>
              ${models.list.map((m) => html`<option value=${m} ?selected=${m === c.model}>${m}</option>`)}
            </select></label>`
        : nothing}
      <span class="muted small">${why}</span>
      <span class="spacer"></span>
      ${running && running.status !== 'sending'
        ? html`<button type="button" class="danger" @click=${() => conv.stop(s.id)} title="Stop (Esc)">Stop</button>`
        : html`<button type="submit" class="primary" ?disabled=${closed || !!running} title="Send (Enter)">Send</button>`}
    </div>
  </form>`;
}

