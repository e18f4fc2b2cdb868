// The centre of the workbench: the Session header, the conversation and the
// composer. Turns go out as the /ws `session` command and come back as the
// turn frames (session-accepted, session-start, token, reasoning, tool-call,
// then exactly one of session-done, -cancelled or -error).

import { html, nothing, repeat, live, ref, guard, unsafeHTML } from '/vendor/lit.js';
import * as S from './store.js';
import { api, ApiError, path, sessionPath } from './api.js';
import { newID, copyText, exportName } from './util.js';
import { badge } from './rail.js';
import { isPreviewRef, previewLabel } from './refs.js';
import { createMarkdown } from './markdown.js';
import { toolSummary, shellResult, editDiff, toolArgs } from './toolcard.js';
import { latticeView } from './lattice.js';
import { diffView as lineDiffView, diffGen } from './diffview.js';
import { reviewCardView, reviewTrayView } from './review.js';
import { agentName } from './dialogs.js';
import { isReviewRef, REVIEW_ASK, reviewRef } from './reviewrules.js';
import { teamOf, targetOf } from './latticerules.js';
import { retainedView } from './remote.js';
import { isRemote } from './remoterules.js';

// Markdown loads with the first Agent message; until then answers show as
// plain text. mdGen is part of each turn's guard, so they re-render once.
let renderMarkdown = null;
let mdLoad = null;
let mdGen = 0;
function markdownReady(app) {
  if (renderMarkdown || mdLoad) return;
  mdLoad = import('/vendor/markdown.js').then((m) => {
    renderMarkdown = createMarkdown(m);
    mdGen++;
    app.update();
  }).catch((err) => app.fail(err, 'Loading the Markdown renderer'));
}


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

  /**
   * editResend rewinds to just before a turn (the caller confirmed: files
   * stay as they are) and sends text in its place, with its references.
   * The first turn rewinds to an empty conversation (keep: 0).
   */
  async editResend(id, turnId, text) {
    const log = S.turnLog(this.app.state, id);
    const i = log.turns.findIndex((t) => t.turn_id === turnId);
    if (i < 0) throw new Error('That turn is no longer in the conversation.');
    const t = log.turns[i];
    const body = i > 0 ? { keep_through_turn_id: log.turns[i - 1].turn_id } : { keep: 0 };
    const r = await api('POST', sessionPath(id, '/rewind'), body);
    S.loadTurns(this.app.state, id, r.turns || []);
    const c = this.composer(id);
    const keep = { text: c.text, refs: c.refs, model: c.model };
    Object.assign(c, { text, refs: [...t.context], model: t.model || '' });
    this.send(id);
    Object.assign(c, keep);
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
    const gen = (se.gen = (se.gen || 0) + 1);
    this.app.update();
    try {
      const r = await api('GET', path('/api/session-turns/search', { q, limit: 20 }));
      if (se.q !== q || se.gen !== gen) return;
      se.hits = r.hits || [];
      se.error = '';
    } catch (err) {
      if (se.q !== q || se.gen !== gen) return;
      se.hits = null;
      se.error = err.message;
    } finally {
      if (se.q === q && se.gen === gen) se.busy = false;
      this.app.update();
    }
  }

  /** jump opens a search hit's Session and scrolls to its turn. */
  jump(hit) {
    const se = this.search;
    se.hits = null;
    se.q = '';
    se.error = '';
    se.gen = (se.gen || 0) + 1; // a search still in flight no longer opens its list
    this.focusTurn = { session: hit.session_id, turn: hit.turn_id };
    this.stick = false;
    if (this.app.ui.route.session !== hit.session_id) this.app.openSession(hit.session_id);
    this.app.update();
  }

  /** closeSearch drops the results (another Session was opened, or Esc). */
  closeSearch() {
    const se = this.search;
    if (this.focusTurn?.session !== this.app.ui.route.session) this.focusTurn = null; // the user moved on
    se.gen = (se.gen || 0) + 1;
    se.q = '';
    se.hits = null;
    se.error = '';
    se.busy = false;
  }

  /** loadAttachments re-reads the Session's active composer attachments. */
  async loadAttachments(id) {
    if (this.app.state.deleting.has(id)) return;
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
      c = { text: '', refs: [], model: '', target: '' };
      this.composers.set(id, c);
    }
    return c;
  }

  /** load re-reads a Session's durable turns and (unless told not to) its attachments. */
  async load(id, { attachments = true } = {}) {
    if (this.app.state.deleting.has(id)) return;
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
    const target = targetOf(c.target, app.ui.lattice, app.state.sessions.get(id));
    if (target) cmd.target_agent = target;
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

  /**
   * sendReview starts the next turn with the review tray's comments as
   * context references, and what the composer holds (or a plain ask).
   */
  sendReview(id) {
    const c = this.composer(id);
    const comments = this.app.review.list(id);
    if (!comments.length) return false;
    const keep = { text: c.text, refs: c.refs };
    c.text = c.text.trim() || REVIEW_ASK;
    c.refs = [...c.refs, ...comments.map(reviewRef)];
    if (this.send(id)) {
      this.app.review.clear(id);
      return true;
    }
    Object.assign(c, keep);
    return false;
  }

  /**
   * retry sends a failed turn's message again, as a new turn with the same
   * references and model; what the composer holds stays there.
   */
  retry(id, t) {
    const c = this.composer(id);
    const keep = { text: c.text, refs: c.refs, model: c.model, target: c.target };
    Object.assign(c, { text: t.display_input, refs: [...t.context], model: t.model || '', target: t.target || '' });
    const sent = this.send(id);
    Object.assign(c, keep);
    this.app.update();
    return sent;
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

  /** opened marks a tool card the user expanded: what it shows lazily (a write's diff) loads now. */
  opened(id, turnId, c) {
    c.opened = true;
    const t = this.app.state.turns.get(id)?.turns.find((x) => x.turn_id === turnId);
    if (t) t.rev++;
    this.app.update();
  }

  /**
   * writeDiff is the turn's change to a written file against its previous
   * content ({loading} while it is read, {diff}, or null when the turn's
   * changes do not name it: not a Git Workspace, or still running).
   */
  writeDiff(s, turnId, file) {
    const t = this.app.state.turns.get(s.id)?.turns.find((x) => x.turn_id === turnId);
    const rel = String(file || '').startsWith(`${s.working_dir}/`) ? file.slice(s.working_dir.length + 1) : String(file || '').replace(/^\.?\/+/, '');
    if (!t?.changed?.includes(rel)) return null;
    this.diffs ??= new Map();
    const key = `${turnId}|${rel}`;
    let d = this.diffs.get(key);
    if (!d) {
      d = { loading: true };
      this.diffs.set(key, d);
      api('GET', path(sessionPath(s.id, `/turns/${encodeURIComponent(turnId)}/changes/diff`), { path: rel }))
        .then((x) => { if (!x.binary) d.diff = x; })
        .catch(() => {}) // the content it wrote stays shown
        .finally(() => { d.loading = false; t.rev++; this.app.update(); });
    }
    return d;
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
      const li = el.querySelector(`[data-turn="${CSS.escape(this.focusTurn.turn)}"]`);
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

/** sessionView renders a Session; above (the approval cards) floats over its composer. */
export function sessionView(app, s, above = nothing) {
  const agent = s.mode.kind === 'single_agent' ? app.ui.agents.find((a) => a.agent_id === s.mode.agent_id) : null;
  const tokens = S.sessionTokens(app.state, s.id);
  const closed = s.status === 'closed';
  const tool = app.ui.inspector;
  return html`<header class="session-head">
      <button class="icon menu-btn" aria-label="Open the rail" @click=${() => app.toggleRail()}>☰</button>
      <h1 class="session-title" title=${s.working_dir}>${s.name}</h1>
      ${badge(S.sessionBadge(app.state, s, app.ui.conn.status), 'env-badge')}
      ${isRemote(s) ? html`<span class="branch-chip remote-chip mono" title="Runs in a clone on the remote Docker engine; its work comes home to the Workspace repository as lathe/${s.id}"><span aria-hidden="true">⛁</span><span class="sr-only">remote</span></span>` : nothing}
      ${s.isolation === 'worktree' ? html`<span class="branch-chip mono" title="Works in its own copy of the repository (${s.working_dir}), on branch ${s.branch}">⎇ ${s.branch}</span>` : nothing}
      <span class="meta">${s.mode.kind === 'single_agent' ? html`Agent <b>${agent ? agent.name || agent.agent_id : s.mode.agent_id}</b>` : 'Lattice'}</span>
      ${tokens.any ? html`<span class="meta session-usage" title="Usage of the turns in this conversation (rewound turns are not counted)">${S.usageLine(tokens)}</span>` : nothing}
      ${closed ? html`<button @click=${() => app.dialogs.reopen(s.id)}>Reopen</button>` : nothing}
      <button class="icon" aria-label="Session actions" title="Rename, close or delete"
        @click=${() => app.dialogs.open('session-actions', { session: s.id })}>⋯</button>
      <span class="spacer"></span>
      <div class="tool-tabs" role="group" aria-label="Tools">
        <button aria-pressed=${tool === 'files' ? 'true' : 'false'} @click=${() => app.showTool('files')}>Files</button>
        <button aria-pressed=${tool === 'environment' ? 'true' : 'false'} @click=${() => app.showTool('environment')}>Environment</button>
        <button aria-pressed=${tool === 'git' ? 'true' : 'false'} @click=${() => app.showTool('git')}>Source Control</button>
        <button aria-pressed=${tool === 'preview' ? 'true' : 'false'} @click=${() => app.showTool('preview')}>Preview</button>
        <button aria-pressed=${tool === 'history' ? 'true' : 'false'} @click=${() => app.showTool('history')}>History</button>
        ${s.mode.kind === 'single_agent' ? html`<button aria-pressed=${tool === 'ways' ? 'true' : 'false'} @click=${() => app.showTool('ways')}>Ways</button>` : nothing}
        <button aria-pressed=${app.ui.dockOpen ? 'true' : 'false'} @click=${() => app.toggleDock()}>Terminal</button>
      </div>
    </header>
    ${closed ? html`<div class="banner" role="status">This Session is closed. Its history stays; reopen it to work in it again.</div>` : nothing}
    ${retainedView(app, s)}
    <div class="conv-bar">
      ${searchView(app)}
      <span class="spacer"></span>
      <span class="export" role="group" aria-label="Export the conversation">Export
        <a href=${path(sessionPath(s.id, '/export'), { format: 'markdown' })} download=${exportName(s.name, new Date(), 'md')}
          @click=${(e) => downloadExport(app, e, exportName(s.name, new Date(), 'md'))}>Markdown</a>
        <a href=${path(sessionPath(s.id, '/export'), { format: 'json' })} download=${exportName(s.name, new Date(), 'json')}
          @click=${(e) => downloadExport(app, e, exportName(s.name, new Date(), 'json'))}>JSON</a></span>
    </div>
    ${pastTurns(app, s)
      ? pastTranscriptView(app, s, pastTurns(app, s))
      : html`${transcriptView(app, s)}
        ${above}
        ${composerView(app, s)}`}`;
}

/**
 * downloadExport saves an export under the Session's name and date. The
 * route names its attachment by the Session's ID, and a server's file name
 * wins over the link's download attribute, so the page fetches the export
 * and saves it from a blob it names itself.
 */
async function downloadExport(app, e, name) {
  e.preventDefault();
  const href = e.currentTarget.href;
  try {
    const r = await fetch(href, { credentials: 'same-origin' });
    if (!r.ok) throw new ApiError(r.status, `${r.status} ${r.statusText}`);
    const url = URL.createObjectURL(await r.blob());
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    a.hidden = true;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  } catch (err) {
    app.fail(err, 'Export');
  }
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
      ${repeat(turns, (t) => t.turn_id, (t) => guard([t, t.rev, turns.at(-1) === t, mdGen, diffGen, s.status], () => turnView(app, s, t, turns.at(-1) === t)))}
    </ol>
  </section>`;
}

/**
 * pastTurns are the conversation as of the point History is scrubbed to
 * (the durable records of GET at/{seq}, shown as the transcript shows
 * them), or null when the centre shows now.
 */
function pastTurns(app, s) {
  const h = app.history;
  const st = h.past?.state;
  if (!st || h.session !== s.id || app.ui.inspector !== 'history') return null;
  if (h.past.turnsOf !== st) {
    h.past.turnsOf = st;
    h.past.turns = (st.turns || []).filter((r) => !r.rewound).map(S.normaliseTurn);
  }
  return h.past.turns;
}

/** pastTranscriptView is the read-only conversation as of a past seq, with the way back to now. */
function pastTranscriptView(app, s, turns) {
  const h = app.history;
  return html`<p class="banner warn past-banner" role="status">Viewing the conversation as of seq ${h.past.seq.toLocaleString('en-US')}
      ${h.past.at ? html` · ${new Date(h.past.at).toLocaleTimeString()}` : nothing} — read-only.
      <button type="button" @click=${() => h.backToNow()}>Back to now</button></p>
    <section class="transcript past" aria-label="Conversation as it was" tabindex="-1">
      ${turns.length ? nothing : html`<div class="empty small"><p>No turns yet at that point.</p></div>`}
      <ol class="turns">${turns.map((t, i) => turnView(app, s, t, i === turns.length - 1, true))}</ol>
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

function turnView(app, s, t, last, ro = false) {
  const ended = t.status === 'done' || t.status === 'cancelled' || t.status === 'error';
  const tok = t.tokens;
  const usage = S.usageLine(tok);
  const answer = S.turnText(t);
  return html`<li class="turn ts-${t.status}" data-turn=${t.turn_id} tabindex="-1">
    <div class="user-turn">
      <div class="who">You${t.model ? html` <span class="muted small">· model ${t.model}</span>` : nothing}
        ${!ro && s.status !== 'closed' && !S.activeTurn(app.state, s.id) && t.status !== 'sending'
          ? html`<button type="button" class="link small edit-msg" aria-label="Edit and resend your message" title="Edit this message and send it again, rewinding to before it"
              @click=${() => app.dialogs.open('edit-resend', { session: s.id, turn: t.turn_id, value: t.display_input })}>Edit…</button>`
          : nothing}
        <button type="button" class="link small copy-msg" aria-label="Copy your message" title="Copy your message"
          @click=${() => copyText(app, t.display_input, 'Your message')}>Copy</button></div>
      <div class="text">${t.display_input}</div>
      ${reviewCardView(t.context)}
      ${t.context.some((r) => !isReviewRef(r)) ? html`<ul class="chips">${t.context.filter((r) => !isReviewRef(r)).map((r) => html`<li class="chip" title=${r.text}>${refLabel(r)}</li>`)}</ul>` : nothing}
      ${t.attachments.length ? html`<p class="muted small turn-attachments">With ${t.attachments.length} attachment${t.attachments.length === 1 ? '' : 's'}</p>` : nothing}
    </div>
    <div class="agent-turn">
      <div class="who">${t.target ? html`Worker <b title="Agent ${t.target}">${agentName(app, t.target)}</b>` : t.lattice ? 'Team' : 'Agent'} <span class="turn-status" data-status=${t.status}>${STATUS[t.status] || t.status}</span>
        ${ranView(app, t.ran)}
        ${answer ? html`<button type="button" class="link small copy-msg" aria-label="Copy the Agent's answer" title="Copy the Agent's answer as Markdown"
          @click=${() => copyText(app, answer, 'The answer')}>Copy</button>` : nothing}
        ${!ro && (t.status === 'error' || t.status === 'failed') && last && s.status !== 'closed'
          ? html`<button type="button" class="link small retry" title="Send this message again as a new turn"
              @click=${() => app.conversation.retry(s.id, t)}>Retry</button>`
          : nothing}
        ${!ro && ended && !last && s.status !== 'closed'
          ? html`<button type="button" class="link small rewind" title="Hide every later turn from the conversation and the model's history"
              @click=${() => app.dialogs.open('rewind', { session: s.id, turn: t.turn_id })}>Rewind to here…</button>`
          : nothing}</div>
      ${t.plan ? planView(t.plan) : nothing}
      ${t.lattice
        ? latticeView(t, (p) => partView(app, s, p, t.turn_id), (id) => agentName(app, id))
        : t.parts.map((p) => partView(app, s, p, t.turn_id))}
      ${t.error ? html`<p class="error-text" role="alert">⚠ Error: ${t.error}</p>` : nothing}
      ${t.notice ? html`<p class="muted small">${t.notice}</p>` : nothing}
      ${usage ? html`<p class="turn-tokens muted small" title=${`input ${tok.input}, output ${tok.output}, reasoning ${tok.reasoning}`}>
        ${usage} · in ${tok.input.toLocaleString('en-US')} · out ${tok.output.toLocaleString('en-US')}${tok.reasoning ? ` · reasoning ${tok.reasoning.toLocaleString('en-US')}` : ''}</p>` : nothing}
    </div>
  </li>`;
}

/**
 * ranView says which outside agent ran a turn, its version and its model
 * ("Claude Code 0.23.1 · claude-sonnet-4-6"); a built-in Agent's turn shows
 * nothing more than before.
 */
export function ranView(app, ran) {
  if (!ran || !(ran.name || ran.version)) return nothing;
  const reported = [ran.name, ran.version].filter(Boolean).join(' ');
  return html`<span class="muted small turn-ran" title=${`Agent ${ran.agent}, reported as ${reported}${ran.model ? `, on model ${ran.model}` : ''}`}>· ${S.ranLine(ran, (id) => agentName(app, id))}</span>`;
}

/** planView is an outside agent's plan for the turn as a checklist, each entry's status marked and said. */
function planView(plan) {
  const done = plan.filter((e) => e.status === 'completed').length;
  return html`<section class="turn-plan" aria-label="Plan">
    <div class="muted small">Plan · ${done} of ${plan.length} done</div>
    <ul>${plan.map((e) => {
      const [mark, words] = S.PLAN_STATUS[e.status];
      return html`<li class="plan-entry" data-status=${e.status}><span class="plan-mark" aria-hidden="true">${mark}</span>
        <span class="plan-content">${e.content}</span> <span class="muted small plan-status">${words}</span>${e.priority === 'high' ? html` <span class="muted small">· high priority</span>` : nothing}</li>`;
    })}</ul>
  </section>`;
}

function partView(app, s, p, turnId) {
  switch (p.kind) {
    case 'reasoning':
      return html`<details class="reasoning"><summary>Reasoning (${p.text.length.toLocaleString('en-US')} characters)</summary><pre>${p.text}</pre></details>`;
    case 'text':
      return answerView(app, p);
    default:
      return toolCard(app, s, p.tool, turnId);
  }
}

/**
 * answerView renders an Agent's text (p.text; p caches its HTML) as
 * sanitised Markdown, plain text until the renderer loads. The Chats use it too.
 */
export function answerView(app, p) {
  markdownReady(app);
  if (!renderMarkdown) return html`<div class="answer plain">${p.text}</div>`;
  if (p.htmlOf !== p.text) {
    p.html = renderMarkdown(p.text);
    p.htmlOf = p.text;
  }
  return html`<div class="answer md" @click=${(e) => copyCode(app, e)}>${unsafeHTML(p.html)}</div>`;
}

/** copyCode copies a code block's text when its Copy button is clicked. */
function copyCode(app, e) {
  const btn = e.target.closest?.('button.copy-code');
  if (!btn) return;
  const code = btn.closest('.code-block')?.querySelector('pre code, pre');
  if (code) copyText(app, code.textContent, 'The code');
}

function toolCard(app, s, c, turnId) {
  const state = c.phase !== 'result' ? 'running' : c.is_error ? 'error' : 'ok';
  const waits = state === 'running' && S.approvalFor(app.state, turnId, c);
  // A PreToolUse hook that blocked the call answers "blocked by hook `name`: reason" (runtime/hooks).
  const blocked = state === 'error' && String(c.result).startsWith('blocked by hook `') ? String(c.result) : '';
  const mark = waits ? '? awaiting your approval' : blocked ? '⊘ blocked by hook' : { running: '◌ running', error: '✕ failed', ok: '✓ done' }[state];
  const sum = toolSummary(c);
  return html`<details class="tool-card tc-${waits ? 'awaiting' : state} tk-${sum.kind}" ?open=${state === 'error'} data-call=${c.call_id}
      @toggle=${(e) => { if (e.target === e.currentTarget && e.target.open && !c.opened) app.conversation.opened(s.id, turnId, c); }}>
    <summary><span class="tool-title">${sum.title}</span> <span class="tool-state">${mark}</span>
      ${c.agent ? html`<span class="muted small" title=${`Agent ${c.agent}`}>· ${agentName(app, c.agent)}</span>` : nothing}
      ${c.occurrence > 1 ? html`<span class="muted small">· call ${c.call_id} #${c.occurrence}</span>` : nothing}</summary>
    ${blocked ? html`<pre class="tool-output error-text tool-blocked">${blocked}</pre>` : toolBody(app, s, c, sum, state, turnId)}
    <details class="tool-raw"><summary>Raw call</summary>
      <div class="muted small">Tool <code class="tool-name">${c.name}</code> · arguments</div><pre class="tool-args">${rawArgs(c.arguments)}</pre>
      ${state !== 'running' ? html`<div class="muted small">${state === 'error' ? 'Error result' : 'Result'}</div><pre class="tool-result">${c.result}</pre>` : nothing}
    </details>
  </details>`;
}

/** toolBody is what an expanded card shows: a diff or content, a terminal block, or the result. */
function toolBody(app, s, c, sum, state, turnId) {
  const a = toolArgs(c.arguments);
  const open = sum.path && !(sum.kind === 'read' && state === 'error') // no link to a file that could not be read
    ? html`<button type="button" class="link small open-file" title="Open ${sum.path} in the editor"
        @click=${() => app.go({ session: s.id, tool: 'files', file: sum.path.replace(/^\/+/, '') })}>Open ${sum.path}</button>`
    : nothing;
  const result = state === 'running' ? nothing : html`<pre class="tool-output ${state === 'error' ? 'error-text' : ''}">${c.result}</pre>`;
  switch (sum.kind) {
    case 'shell': {
      const r = state === 'running' ? null : shellResult(c.result);
      return html`<div class="term-block" role="group" aria-label="Shell command and output">
        <pre class="term-cmd"><span class="prompt" aria-hidden="true">$ </span>${sum.command}</pre>
        ${r ? html`<pre class="term-out">${r.output}</pre><div class="term-exit small">${r.ended || 'ended'}</div>` : html`<div class="term-exit small">running…</div>`}
      </div>`;
    }
    case 'edit':
      return html`<div class="tool-file">${open}
        <pre class="diff">${editDiff(a).map((l) => html`<span class=${l.op === '+' ? 'add' : 'del'}>${l.op} ${l.text}</span>`)}</pre>
        ${state === 'error' ? result : nothing}</div>`;
    case 'write': {
      // Against the previous content once the turn's changes are known; until then, what it wrote.
      const d = c.opened && state === 'ok' ? app.conversation.writeDiff(s, turnId, sum.path) : null;
      return html`<div class="tool-file">${open}
        ${d?.diff
          ? lineDiffView(app, d.diff, `The turn's change to ${d.diff.path}`, { session: s.id, path: d.diff.path, source: 'a turn\'s change' })
          : typeof a.content === 'string'
            ? html`${d?.loading ? html`<p class="muted small">Reading the change against the previous content…</p>` : html`<p class="muted small">The content it wrote (the previous content is not known here):</p>`}
              <pre class="diff">${a.content.replace(/\n$/, '').split('\n').map((l) => html`<span class="add">+ ${l}</span>`)}</pre>`
            : nothing}
        ${state === 'error' ? result : nothing}</div>`;
    }
    case 'read':
      return html`<div class="tool-file">${open}${result}</div>`;
    default:
      return result;
  }
}

/** rawArgs indents a JSON text, or returns it as it is when it is not JSON. */
function rawArgs(args) {
  if (typeof args !== 'string') return JSON.stringify(args, null, 2);
  try {
    return JSON.stringify(JSON.parse(args), null, 2);
  } catch {
    return args;
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
  const held = S.waysHold(app.state, s);
  const closed = s.status === 'closed' || !!held; // nothing can be sent: closed, or a Ways set holds the Workspace
  const offline = app.ui.conn.status !== 'live';
  const why = s.status === 'closed' ? 'Reopen this Session to send.' : offline ? 'Offline: your message is sent when the connection is back.' : '';
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
    ${held ? waysHoldView(app, s, held) : nothing}
    ${reviewTrayView(app, s, closed || !!running || offline)}
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
      ${s.mode.kind === 'lattice' ? workerPicker(app, s, c) : nothing}
      <span class="muted small">${why}</span>
      <span class="spacer"></span>
      ${running && running.status !== 'sending'
        ? html`<button type="button" class="danger" @click=${() => conv.stop(s.id)} title="Stop (Esc)">Stop</button>`
        : html`<button type="submit" class="primary" ?disabled=${closed || !!running} title="Send (Enter)">Send</button>`}
    </div>
  </form>`;
}


/** waysHoldView is the composer's line while a Ways set owns the Workspace, with a link to the set. */
function waysHoldView(app, s, own) {
  const open = () => app.go({ session: own.session, tool: 'ways' });
  return html`<p class="banner warn ways-hold" role="status"><span aria-hidden="true">◌ </span>${S.waysHoldWords(own, s.id)}
    <button type="button" class="link" @click=${open}>Open the Ways</button></p>`;
}

/**
 * workerPicker addresses a lattice Session's next turn: the whole team (the
 * coordinator plans) or one Worker alone (target_agent).
 */
function workerPicker(app, s, c) {
  const team = teamOf(app.ui.lattice, s);
  return html`<label class="model"><span class="sr-only">Who takes the next turn</span>
    <select class="worker-picker" .value=${live(c.target)} @change=${(e) => { c.target = e.target.value; app.update(); }}
      title="The whole team (the coordinator plans and the Workers bid), or one Worker alone">
      ${app.ui.lattice?.coordinator ? html`<option value="">Whole team</option>` : nothing}
      ${team.map((w) => html`<option value=${w} ?selected=${w === c.target}>${agentName(app, w)}</option>`)}
    </select></label>`;
}
