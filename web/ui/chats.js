// The Chats view (#/chats, #/chats/<id>, in the centre): the list with
// search and stars, a new Chat with an Agent, and one conversation that
// streams over /ws (chat-turn; its frames come to this tab only), with
// Stop, fork from a message, export, the overrides, and attachments from
// an upload or from the shared file store. The record (GET /api/chat/<id>)
// is the truth: it is re-read when a turn ends. A read that lands merges:
// the drafts (one per Chat), a turn sent or streaming in this tab and an
// overrides form being edited survive it, and a read overtaken by a newer
// one, or for a Chat no longer open, is dropped.

import { html, nothing, live, repeat } from '/vendor/lit.js';
import { api, path } from './api.js';
import { applyChatFrame, newStream, usageWords, forkPlan, overridePatch, contentText, TERMINAL, settledBy, streamedHere, chatStub, withStreamed, tookTurn } from './chatrules.js';
import { relTime, bytes } from './util.js';
import { answerView } from './session.js';
import { agentName } from './dialogs.js';

const enc = encodeURIComponent;
const chatPath = (id, rest = '') => `/api/chat/${enc(id)}${rest}`;

/**
 * readLatest reads a list for owner (a view with app, gen and error),
 * keeping only the newest of overlapping reads, and renders.
 */
export async function readLatest(owner, url, set) {
  const gen = ++owner.gen;
  try {
    const v = await api('GET', url);
    if (gen !== owner.gen) return;
    set(v || []);
    owner.error = '';
  } catch (err) {
    if (gen !== owner.gen) return;
    if (err.status === 401) owner.app.fail(err);
    owner.error = err.message;
  }
  owner.app.update();
}

export class Chats {
  constructor(app) {
    this.app = app;
    this.list = null; // [ChatInfo] of the last search
    this.q = '';
    this.chat = null; // the open Chat's record
    this.streams = new Map(); // chat id → the turn streaming in this tab
    this.composer = new Map(); // chat id → text being written
    this.unsure = new Map(); // chat id → text sent as the connection went, not yet started
    this.error = '';
    this.creating = false;
    this.newAgent = '';
    this.newName = '';
    this.store = null; // shared files offered to attach, once asked for
    this.overrides = null; // {system, model} being edited
    this.attaching = false;
    this.gen = 0;
    this.chatGen = 0; // the newest read of the open Chat's record
    this.listTimer = 0;
  }

  show(id = null) {
    this.app.ui.railOpen = false;
    this.app.go({ view: 'chats', chat: id });
  }

  isOpen() {
    return this.app.ui.route.view === 'chats';
  }

  /**
   * enter loads the list and the Chat the route names. Until its record
   * lands, a stub of it is open, so what is typed or sent meanwhile goes
   * to it and not to the Chat shown before.
   */
  enter(id) {
    this.loadList();
    if (!id) {
      this.chat = null;
      return;
    }
    if (this.chat?.id !== id) {
      this.chat = chatStub(id, this.list?.find((c) => c.id === id));
      this.overrides = null;
    }
    this.loadChat(id);
  }

  loadList() {
    return readLatest(this, path('/api/chat', { q: this.q || undefined }), (list) => { this.list = list; });
  }

  /** loadChat reads the Chat's record and, unless a newer read or another Chat overtook it, merges it in. */
  async loadChat(id) {
    const gen = ++this.chatGen;
    const current = () => gen === this.chatGen && this.app.ui.route.chat === id;
    try {
      const c = await api('GET', chatPath(id));
      if (!current()) return;
      this.land(c);
    } catch (err) {
      if (!current()) return;
      if (err.status === 404) {
        this.chat = null;
        this.app.toast(`Chat ${id} does not exist (any more).`, 'error');
        this.show(null);
        return;
      }
      this.app.fail(err, 'Reading the Chat');
    }
    this.app.update();
  }

  /**
   * land makes c the open Chat: the overrides form stays while it is the
   * same Chat, and the stream in this tab goes once the record holds its
   * reply. A read still in flight is older than c: it is dropped.
   */
  land(c) {
    this.chatGen++;
    if (this.chat?.id !== c.id) this.overrides = null;
    this.chat = c;
    if (settledBy(c, this.streams.get(c.id))) this.streams.delete(c.id);
    const text = this.unsure.get(c.id);
    if (text === undefined) return;
    this.unsure.delete(c.id);
    if (tookTurn(c, text) || this.composer.get(c.id)) return;
    this.composer.set(c.id, text);
    this.app.toast('The connection went before the Chat took your message: it is back in the box.', 'error');
  }

  /**
   * reconnected drops the turns streaming to the connection that was lost
   * (their frames will not come here) and re-reads: the record shows a
   * turn still running, and its end arrives as a chat event. A message
   * sent whose turn had not started goes back to the box if the record
   * does not show it.
   */
  reconnected() {
    for (const [id, st] of this.streams) if (st.status === 'sending' && !st.turnId) this.unsure.set(id, st.content);
    this.streams.clear();
    if (this.isOpen()) this.enter(this.app.ui.route.chat);
  }

  /** changed hears a chat-* event: the list and the open Chat re-read. */
  changed(id) {
    if (!this.isOpen()) return;
    clearTimeout(this.listTimer);
    this.listTimer = setTimeout(() => this.loadList(), 100);
    const st = this.streams.get(id);
    if (this.chat?.id === id && !(st && (st.status === 'sending' || st.status === 'running'))) this.loadChat(id);
  }

  search(q) {
    this.q = q;
    clearTimeout(this.listTimer);
    this.listTimer = setTimeout(() => this.loadList(), 150);
  }

  async create() {
    const agent = this.newAgent || this.app.ui.agents[0]?.agent_id;
    if (!agent) return;
    try {
      const c = await api('POST', '/api/chat', { agent_id: agent, ...(this.newName.trim() ? { name: this.newName.trim() } : {}) });
      this.creating = false;
      this.newName = '';
      this.land(c);
      this.show(c.id);
      this.loadList();
    } catch (err) {
      this.app.fail(err, 'Creating the Chat');
    }
  }

  async patch(id, body, what) {
    try {
      const c = await api('PATCH', chatPath(id), body);
      if (this.chat?.id === id) this.land(c);
      this.loadList();
    } catch (err) {
      this.app.fail(err, what);
    }
    this.app.update();
  }

  async remove(c) {
    this.app.dialogs.confirm({
      title: `Delete the Chat “${c.name}”?`,
      body: html`<p>Its ${c.message_count} message${c.message_count === 1 ? '' : 's'} are deleted for good. Shared files it attached stay in the shared store.</p>`,
      label: 'Delete Chat',
      action: async () => {
        await api('DELETE', chatPath(c.id));
        if (this.chat?.id === c.id) this.show(null);
        this.loadList();
      },
    });
  }

  /** send starts a turn with the composer's text, or with typed: what the box holds when Enter was pressed. */
  send(typed) {
    const c = this.chat;
    if (!c) return;
    if (typed !== undefined) this.composer.set(c.id, typed);
    const text = (this.composer.get(c.id) || '').trim();
    const st = this.streams.get(c.id);
    if (!text || (st && (st.status === 'sending' || st.status === 'running'))) return;
    if (!this.app.live.send({ cmd: 'chat-turn', chat_id: c.id, content: text })) {
      this.app.toast('Not connected: the message was not sent.', 'error');
      return;
    }
    // The turn that ended here stays in view until the read with its reply lands.
    if (st?.turnId && !settledBy(c, st)) this.chat = withStreamed(c, st);
    this.streams.set(c.id, newStream(text));
    this.composer.set(c.id, '');
    this.app.update();
  }

  stop() {
    const c = this.chat;
    if (c && this.streams.get(c.id)?.status === 'running') this.app.live.send({ cmd: 'chat-stop', chat_id: c.id });
  }

  /** frame folds a Chat frame; a turn's end re-reads the record. */
  frame(f) {
    const ended = applyChatFrame(this.streams, f);
    if (ended) {
      const st = this.streams.get(f.chat_id);
      if (f.kind === 'chat-error') this.app.toast(`Chat: ${f.error}`, 'error');
      // A turn refused before it started: its text goes back to the box, unless a new draft is there.
      if (st && !st.turnId && !this.composer.get(f.chat_id)) this.composer.set(f.chat_id, st.content);
      if (this.chat?.id === f.chat_id) this.loadChat(f.chat_id);
      else if (st) this.streams.delete(f.chat_id);
      this.loadList();
    }
    if (TERMINAL.has(f.kind) || this.chat?.id === f.chat_id) this.app.update();
  }

  async fork(index) {
    const c = this.chat;
    const plan = forkPlan(c, index);
    try {
      const fork = await api('POST', chatPath(c.id, '/fork'), plan.body);
      if (plan.prefill) this.composer.set(fork.id, plan.prefill);
      this.land(fork);
      this.show(fork.id);
      this.loadList();
      this.app.toast(`Forked "${c.name}" before message ${index + 1}.`);
    } catch (err) {
      this.app.fail(err, 'Forking the Chat');
    }
  }

  async attachUpload(files) {
    const c = this.chat;
    if (!c || !files.length) return;
    this.attaching = true;
    this.app.update();
    try {
      for (const f of files) {
        const form = new FormData();
        form.append('file', f, f.name);
        await api('POST', chatPath(c.id, '/attach'), form);
      }
    } catch (err) {
      this.app.fail(err, 'Attaching');
    } finally {
      this.attaching = false;
    }
    this.loadChat(c.id);
  }

  async loadStore() {
    try {
      this.store = (await api('GET', '/api/files')) || [];
    } catch (err) {
      this.app.fail(err, 'Reading the shared files');
    }
    this.app.update();
  }

  async attachStored(fileId) {
    const c = this.chat;
    if (!c || !fileId) return;
    try {
      await api('PUT', chatPath(c.id, '/attach'), { file_id: fileId });
      this.store = null;
    } catch (err) {
      this.app.fail(err, 'Attaching from the store');
    }
    this.loadChat(c.id);
  }

  async pin(a, pinned) {
    try {
      await api('PATCH', chatPath(this.chat.id, `/attach/${enc(a.file_id)}`), { pinned });
    } catch (err) {
      this.app.fail(err, 'Pinning');
    }
    this.loadChat(this.chat.id);
  }

  async detach(a) {
    try {
      await api('DELETE', chatPath(this.chat.id, `/attach/${enc(a.file_id)}`));
    } catch (err) {
      this.app.fail(err, 'Removing the attachment');
    }
    this.loadChat(this.chat.id);
  }

  async saveOverrides() {
    const o = this.overrides;
    await this.patch(this.chat.id, overridePatch(o.system, o.model), 'Saving the overrides');
    this.overrides = null;
  }
}

export function chatsView(app) {
  const m = app.chats;
  return html`<div class="chats panel" role="region" aria-label="Chats">
    <div class="chats-body">
      ${listView(app)}
      ${m.chat ? conversationView(app, m.chat) : html`<div class="chat-empty empty"><p class="muted">Pick a Chat, or start one.</p></div>`}
    </div>
  </div>`;
}

function listView(app) {
  const m = app.chats;
  const agents = app.ui.agents || [];
  return html`<section class="chat-list" aria-label="Chat list">
    <div class="panel-head">
      <h1 class="mcp-title">Chats</h1>
      <span class="grow"></span>
      <button @click=${() => { m.creating = !m.creating; app.update(); }} aria-expanded=${m.creating}>+ Chat</button>
      <a href="#/" class="button">Close</a>
    </div>
    ${m.creating
      ? html`<form class="chat-new pad" @submit=${(e) => { e.preventDefault(); m.create(); }}>
          <label>Agent <select .value=${live(m.newAgent || agents[0]?.agent_id || '')} @change=${(e) => { m.newAgent = e.target.value; }}>
            ${agents.map((a) => html`<option value=${a.agent_id}>${a.name || a.agent_id} (${a.agent_id})</option>`)}
          </select></label>
          <label>Name <input .value=${live(m.newName)} placeholder="optional" @input=${(e) => { m.newName = e.target.value; }}></label>
          <div class="row end"><button class="primary" type="submit" ?disabled=${!agents.length}>Create</button></div>
        </form>`
      : nothing}
    <label class="filter"><span class="sr-only">Search Chats</span>
      <input type="search" placeholder="Search names and messages" .value=${live(m.q)} @input=${(e) => m.search(e.target.value)}>
    </label>
    ${m.error ? html`<p class="error-text pad" role="alert">⚠ ${m.error}</p>` : nothing}
    ${m.list === null && !m.error ? html`<p class="muted pad">Loading…</p>` : nothing}
    ${m.list && !m.list.length ? html`<p class="muted pad small">${m.q ? 'No Chat matches.' : 'No Chats yet.'}</p>` : nothing}
    <ul class="chat-items" aria-label="Chats">
      ${repeat(m.list || [], (c) => c.id, (c) => html`<li class="chat-item" data-chat=${c.id} aria-current=${app.ui.route.chat === c.id ? 'page' : 'false'}>
        <button class="icon star" aria-pressed=${c.starred} aria-label=${c.starred ? `Unstar ${c.name}` : `Star ${c.name}`}
          title=${c.starred ? 'Unstar' : 'Star'} @click=${() => m.patch(c.id, { starred: !c.starred }, 'Starring')}>${c.starred ? '★' : '☆'}</button>
        <a class="chat-link" href="#/chats/${enc(c.id)}">${c.name}</a>
        <span class="muted small">${agentName(app, c.agent_id)} · ${c.message_count} msg · ${relTime(c.updated_at)}</span>
        ${c.active_turn ? html`<span class="badge st-preparing"><span class="dot" aria-hidden="true">◌</span>streaming</span>` : nothing}
      </li>`)}
    </ul>
  </section>`;
}

function conversationView(app, c) {
  const m = app.chats;
  const st = m.streams.get(c.id);
  const running = st && (st.status === 'sending' || st.status === 'running');
  const msgs = c.messages || [];
  return html`<section class="chat-conv" aria-label="Chat ${c.name}">
    <div class="panel-head chat-head">
      <b class="chat-title">${c.name}</b>
      <span class="muted small">with ${agentName(app, c.agent_id)}${c.model_override ? html` · model <code>${c.model_override}</code>` : nothing}${c.system_override ? ' · own system prompt' : ''}</span>
      <span class="grow"></span>
      <span class="export" role="group" aria-label="Export the Chat">Export
        <a href=${chatPath(c.id, '/export')} download>Markdown</a>
        <a href=${path(chatPath(c.id, '/export'), { format: 'json' })} download>JSON</a></span>
      <button @click=${() => { m.overrides = m.overrides ? null : { system: c.system_override || '', model: c.model_override || '' }; app.update(); }}
        aria-expanded=${!!m.overrides}>Overrides</button>
      <button class="danger" @click=${() => m.remove(c)}>Delete…</button>
    </div>
    ${m.overrides ? overridesView(app, c) : nothing}
    <ol class="chat-messages" aria-label="Messages">
      ${c.loading && !msgs.length ? html`<li class="chat-loading muted small">Loading the messages…</li>` : nothing}
      ${msgs.map((msg, i) => streamedHere(msg, st) ? nothing : html`<li class="chat-msg ${msg.role}" data-index=${i}>
        <div class="chat-msg-head"><b>${msg.role === 'user' ? 'You' : agentName(app, c.agent_id)}</b>
          <span class="muted small">${relTime(msg.created_at)}</span>
          ${msg.outcome && msg.outcome !== 'done' ? html`<span class="badge st-failed"><span class="dot" aria-hidden="true">✕</span>${msg.outcome}</span>` : nothing}
          ${msg.refused ? html`<span class="badge st-failed" title="A hook refused this message: no model saw it, and none will">refused</span>` : nothing}
          <span class="grow"></span>
          <button class="link small" title="A new Chat with the messages before this one${msg.role === 'user' ? ', this one back in the composer' : ''}"
            @click=${() => m.fork(i)}>Fork here</button></div>
        ${msg.reasoning ? html`<details class="reasoning"><summary>Reasoning</summary><pre>${contentText(msg.reasoning)}</pre></details>` : nothing}
        ${(msg.tool_calls || []).map((t) => toolLine(t.name, contentText(t.result), t.is_error))}
        ${msg.role === 'assistant' ? answerView(app, rendered(msg)) : html`<div class="chat-text">${contentText(msg.content)}</div>`}
        ${msg.files?.length ? messageFiles(app, c, msg.files) : nothing}
        ${msg.error ? html`<p class="error-text small">⚠ ${msg.error}</p>` : nothing}
        ${msg.usage ? html`<p class="muted small chat-usage">${usageWords(msg.usage)}</p>` : nothing}
      </li>`)}
      ${st ? streamView(app, c, st) : nothing}
    </ol>
    ${composerView(app, c, running)}
  </section>`;
}

/**
 * messageFiles are the attachments a user message's turn took as context,
 * each named as the shared store names it (the Chat's own attachments, or
 * the store's list, read once when a message names a file neither holds).
 */
function messageFiles(app, c, ids) {
  const m = app.chats;
  const fileOf = (id) => (c.attachments || []).find((a) => a.file_id === id)?.file || (m.store || []).find((f) => f.id === id);
  if (!m.store && !m.storeAsked && ids.some((id) => !fileOf(id))) {
    m.storeAsked = true;
    m.loadStore();
  }
  return html`<ul class="chat-msg-files" aria-label="Files of this message">
    ${ids.map((id) => {
      const f = fileOf(id);
      return html`<li class="chip attachment" data-file=${id} title=${f ? `${f.content_type}, ${bytes(f.size)}` : 'a shared file'}>
        <span aria-hidden="true">📎 </span><a href="/api/files/${enc(id)}/bytes" download=${f?.name || ''}>${f?.name || 'a shared file'}</a></li>`;
    })}
  </ul>`;
}

// rendered keeps each message's Markdown rendering with the message object
// (a re-read replaces the objects, and so the renderings).
const renders = new WeakMap();
function rendered(msg) {
  let p = renders.get(msg);
  if (!p) {
    p = { text: contentText(msg.content) };
    renders.set(msg, p);
  }
  return p;
}

/** toolLine is one tool call: its name and result (null: still waiting). */
function toolLine(name, result, isError) {
  return html`<div class="chat-tool small"><code>${name}</code> ${result === null ? '… waiting' : isError ? html`<span class="error-text">✕ ${result}</span>` : html`✓ ${result}`}</div>`;
}

function streamView(app, c, st) {
  return html`<li class="chat-msg user pending"><div class="chat-msg-head"><b>You</b></div><div class="chat-text">${st.content}</div></li>
    <li class="chat-msg assistant streaming" aria-live="polite" data-status=${st.status}>
      <div class="chat-msg-head"><b>${agentName(app, c.agent_id)}</b>
        <span class="badge st-${st.status === 'error' ? 'failed' : st.status === 'done' ? 'ready' : 'preparing'}"><span class="dot" aria-hidden="true">${st.status === 'done' ? '●' : st.status === 'error' ? '✕' : '◌'}</span>${st.status}</span></div>
      ${st.reasoning ? html`<details class="reasoning"><summary>Reasoning</summary><pre>${st.reasoning}</pre></details>` : nothing}
      ${st.tools.map((t) => toolLine(t.name, t.result, t.isError))}
      ${st.text ? answerView(app, st) : nothing}
      ${st.error ? html`<p class="error-text small">⚠ ${st.error}</p>` : nothing}
      ${st.usage ? html`<p class="muted small chat-usage">${usageWords(st.usage)}</p>` : nothing}
    </li>`;
}

function overridesView(app, c) {
  const m = app.chats;
  const o = m.overrides;
  return html`<form class="chat-overrides pad" aria-label="Overrides" @submit=${(e) => { e.preventDefault(); m.saveOverrides(); }}>
    <label>System prompt (replaces the Agent's; empty: the Agent's own)
      <textarea rows="3" .value=${live(o.system)} @input=${(e) => { o.system = e.target.value; }}></textarea></label>
    <label>Model (of the Agent's provider; empty: the Agent's own)
      <input .value=${live(o.model)} @input=${(e) => { o.model = e.target.value; }}></label>
    <div class="row end"><button type="button" @click=${() => { m.overrides = null; app.update(); }}>Cancel</button>
      <button class="primary" type="submit">Save overrides</button></div>
  </form>`;
}

function composerView(app, c, running) {
  const m = app.chats;
  const atts = c.attachments || [];
  return html`<form class="composer chat-composer" @submit=${(e) => { e.preventDefault(); m.send(); }}>
    ${atts.length
      ? html`<ul class="chips" aria-label="Attachments">
          ${atts.map((a) => html`<li class="chip attachment" data-file=${a.file_id} title=${a.file ? `${a.file.content_type}, ${bytes(a.file.size)}` : a.file_id}>
            <a href=${chatPath(c.id, `/attach/${enc(a.file_id)}`)} download>${a.file?.name || a.file_id}</a>
            <label class="small"><input type="checkbox" .checked=${a.pinned} @change=${(e) => m.pin(a, e.target.checked)}> pinned</label>
            <span class="muted small">${a.pinned ? 'every turn' : a.consumed ? 'used' : 'next turn'}</span>
            <button type="button" class="icon" aria-label="Remove attachment ${a.file?.name || a.file_id}" @click=${() => m.detach(a)}>×</button></li>`)}
        </ul>`
      : nothing}
    <label for="chat-input" class="sr-only">Message to the Chat</label>
    <textarea id="chat-input" rows="3" placeholder="Message ${c.agent_id}… (Enter sends, Shift-Enter adds a line)"
      .value=${live(m.composer.get(c.id) || '')} @input=${(e) => m.composer.set(c.id, e.target.value)}
      @keydown=${(e) => {
        if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) { e.preventDefault(); m.send(e.target.value); }
        if (e.key === 'Escape' && running) { e.preventDefault(); m.stop(); }
      }}></textarea>
    <div class="composer-bar">
      <input id="chat-attach-input" type="file" multiple hidden aria-label="Attach a file"
        @change=${(e) => { m.attachUpload([...e.target.files]); e.target.value = ''; }}>
      <button type="button" ?disabled=${m.attaching} @click=${() => document.getElementById('chat-attach-input').click()}>${m.attaching ? 'Attaching…' : 'Attach…'}</button>
      ${m.store === null
        ? html`<button type="button" @click=${() => m.loadStore()}>From the store…</button>`
        : html`<label><span class="sr-only">Attach a stored file</span><select aria-label="Attach a stored file" @change=${(e) => m.attachStored(e.target.value)}>
            <option value="">Attach a stored file…</option>
            ${m.store.filter((f) => !atts.some((a) => a.file_id === f.id)).map((f) => html`<option value=${f.id}>${f.name}</option>`)}
          </select></label>`}
      <span class="spacer"></span>
      ${running
        ? html`<button type="button" class="danger" @click=${() => m.stop()} title="Stop (Esc)">Stop</button>`
        : html`<button type="submit" class="primary">Send</button>`}
    </div>
  </form>`;
}
