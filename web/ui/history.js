// History: a Session's audit trail as a timeline grouped by turn, filtered
// by kind; a scrubber that shows the Session as of any entry (time travel,
// GET …/at/{seq}); and the audit head with the export. Everything is read
// from the daemon, which reads it from the journal: nothing here writes.

import { html, nothing, repeat } from '/vendor/lit.js';
import { api, path, sessionPath } from './api.js';
import { diffView as lineDiffView } from './diffview.js';
import { answerView } from './session.js';
import { actorText, delayTo, generatedPath, groupByTurn, KINDS, kindQuery, replayState, restoreNote, scrubSeq, shortHash, SPEEDS, turnName } from './historyrules.js';

const PAGE = 200;

export class History {
  constructor(app) {
    this.app = app;
    this.session = null;
    this.entries = [];
    this.more = false;
    this.loading = false;
    this.error = '';
    this.kinds = new Set(KINDS);
    this.past = null; // {seq, at, state} while viewing the Session as of an entry
    this.pastError = '';
    this.head = null;
    this.gen = 0; // bumps on every Session or filter change, to drop stale answers
    this.turnTool = null; // {turn, mode: 'replay'|'changes', …} for one turn
  }

  /** show binds the view to a Session and loads its first page. */
  show(s) {
    if (s.id === this.session) return;
    this.session = s.id;
    this.reset();
  }

  reset() {
    this.closeTurn();
    this.entries = [];
    this.more = false;
    this.error = '';
    this.past = null;
    this.pastError = '';
    this.gen++;
    this.load();
    this.loadHead();
  }

  /** load reads the next page of the trail. */
  async load() {
    const id = this.session;
    const gen = this.gen;
    this.loading = true;
    this.app.update();
    try {
      const after = this.entries.at(-1)?.seq ?? 0;
      const page = await api('GET', path(sessionPath(id, '/audit'), { after, limit: PAGE, kind: kindQuery(this.kinds) || undefined }));
      if (gen !== this.gen) return;
      this.entries = [...this.entries, ...page.entries];
      this.more = page.more;
      this.error = '';
    } catch (err) {
      if (gen === this.gen) this.error = err.message;
    } finally {
      if (gen === this.gen) this.loading = false;
      this.app.update();
    }
  }

  async loadHead() {
    try {
      this.head = await api('GET', '/api/audit/head');
    } catch {
      this.head = null;
    }
    this.app.update();
  }

  toggleKind(k) {
    if (this.kinds.has(k)) this.kinds.delete(k);
    else this.kinds.add(k);
    this.reset();
  }

  /** viewAt shows the Session as it was right after seq. */
  async viewAt(seq) {
    if (seq == null) return;
    const id = this.session;
    const gen = this.gen;
    const entry = this.entries.find((e) => e.seq === seq);
    this.past = { seq, at: entry?.at, state: this.past?.seq === seq ? this.past.state : null };
    this.pastError = '';
    this.app.update();
    try {
      const state = await api('GET', sessionPath(id, `/at/${seq}`));
      if (gen !== this.gen || this.past?.seq !== seq) return;
      this.past = { ...this.past, state };
    } catch (err) {
      if (gen === this.gen) this.pastError = err.message;
    }
    this.app.update();
  }

  // --- a turn's replay and its changes ---

  closeTurn() {
    if (this.turnTool?.timer) clearTimeout(this.turnTool.timer);
    this.turnTool = null;
  }

  /** openReplay loads a turn's frames and plays them from the start. */
  async openReplay(turn) {
    this.closeTurn();
    const tool = (this.turnTool = { turn, mode: 'replay', frames: null, played: 0, speed: 1, playing: false, timer: 0, error: '' });
    this.app.update();
    try {
      const r = await api('GET', sessionPath(this.session, `/turns/${encodeURIComponent(turn)}/replay`));
      if (this.turnTool !== tool) return;
      tool.frames = r.frames;
      tool.complete = r.complete;
      this.play();
    } catch (err) {
      if (this.turnTool === tool) tool.error = err.message;
      this.app.update();
    }
  }

  play() {
    const tool = this.turnTool;
    if (!tool?.frames) return;
    if (tool.played >= tool.frames.length) tool.played = 0;
    tool.playing = true;
    this.step();
  }

  pause() {
    const tool = this.turnTool;
    if (!tool) return;
    clearTimeout(tool.timer);
    tool.playing = false;
    this.app.update();
  }

  setSpeed(speed) {
    if (!this.turnTool) return;
    this.turnTool.speed = speed;
    if (this.turnTool.playing) {
      clearTimeout(this.turnTool.timer);
      this.step();
    }
    this.app.update();
  }

  /** step plays the next frame after its original gap, scaled by the speed. */
  step() {
    const tool = this.turnTool;
    if (!tool || !tool.playing) return;
    if (tool.played >= tool.frames.length) {
      tool.playing = false;
      this.app.update();
      return;
    }
    tool.timer = setTimeout(() => {
      if (this.turnTool !== tool || !tool.playing) return;
      tool.played++;
      this.app.update();
      this.step();
    }, delayTo(tool.frames, tool.played, tool.speed));
    this.app.update();
  }

  /** openChanges lists the files a turn changed. */
  async openChanges(turn) {
    this.closeTurn();
    const tool = (this.turnTool = { turn, mode: 'changes', list: null, chosen: new Set(), side: 'before', diff: null, confirm: null, conflicts: null, error: '', busy: false });
    this.app.update();
    try {
      const list = await api('GET', sessionPath(this.session, `/turns/${encodeURIComponent(turn)}/changes`));
      if (this.turnTool !== tool) return;
      tool.list = list;
      tool.chosen = new Set(list.files.map((f) => f.path).filter((p) => !generatedPath(p))); // build and test output is left out
    } catch (err) {
      if (this.turnTool === tool) tool.error = err.message;
    }
    this.app.update();
  }

  async showDiff(path) {
    const tool = this.turnTool;
    try {
      const d = await api('GET', `${sessionPath(this.session, `/turns/${encodeURIComponent(tool.turn)}/changes/diff`)}?path=${encodeURIComponent(path)}`);
      if (this.turnTool === tool) tool.diff = d;
    } catch (err) {
      if (this.turnTool === tool) tool.error = err.message;
    }
    this.app.update();
  }

  /** restore writes the chosen files back; force overrides later changes. */
  async restore(force) {
    const tool = this.turnTool;
    const paths = [...tool.chosen];
    tool.busy = true;
    tool.error = '';
    this.app.update();
    try {
      await api('POST', sessionPath(this.session, `/turns/${encodeURIComponent(tool.turn)}/restore`), { paths, side: tool.side, force });
      if (this.turnTool !== tool) return;
      tool.confirm = null;
      tool.conflicts = null;
      this.app.toast(`Restored ${paths.length} file(s) from ${tool.side} the turn, as uncommitted changes.`);
      this.reset();
    } catch (err) {
      if (this.turnTool !== tool) return;
      tool.confirm = null;
      if (err.status === 409 && Array.isArray(err.body?.conflicts)) tool.conflicts = err.body.conflicts;
      else tool.error = err.message;
    } finally {
      tool.busy = false;
      this.app.update();
    }
  }

  backToNow() {
    this.past = null;
    this.pastError = '';
    this.app.update();
  }
}

/** historyView is the inspector's History tool. */
export function historyView(app, s) {
  const h = app.history;
  h.show(s);
  const groups = groupByTurn(h.entries);
  const idx = h.past ? h.entries.findIndex((e) => e.seq === h.past.seq) : h.entries.length - 1;
  return html`<div class="panel history">
    <div class="panel-head">
      <strong>History</strong>
      <span class="spacer"></span>
      <button ?disabled=${h.loading} @click=${() => h.reset()}>Refresh</button>
      <a class="button" href=${path(sessionPath(s.id, '/audit'), { format: 'ndjson' })} download="audit-${s.id}.ndjson">Export</a>
    </div>
    <fieldset class="history-kinds"><legend class="sr-only">Show</legend>
      ${KINDS.map((k) => html`<label class="check"><input type="checkbox" .checked=${h.kinds.has(k)} @change=${() => h.toggleKind(k)}> ${k}</label>`)}
    </fieldset>
    ${h.entries.length
      ? html`<div class="history-scrub">
          <input type="range" aria-label="Scrub through the history" min="0" max=${h.entries.length - 1} .value=${String(Math.max(0, idx))}
            @change=${(e) => h.viewAt(scrubSeq(h.entries, Number(e.target.value)))}>
          ${h.past
            ? html`<p class="viewing" role="status">Viewing as of seq ${h.past.seq.toLocaleString()}${h.past.at ? html` · ${timeOf(h.past.at)}` : nothing}
                <button @click=${() => h.backToNow()}>Back to now</button></p>`
            : html`<p class="muted small">Now. Choose an entry or drag to see the Session as it was.</p>`}
        </div>`
      : nothing}
    ${h.past ? pastView(h) : nothing}
    ${h.turnTool ? turnToolView(h) : nothing}
    ${h.error ? html`<p class="banner error" role="alert">Could not load the history: ${h.error}
      <button class="link" @click=${() => h.reset()}>Retry</button></p>` : nothing}
    <ol class="timeline" aria-label="Audit trail">
      ${repeat(groups, (g) => `${g.turn}-${g.entries[0].seq}`, (g) => html`<li class=${g.turn ? 'turn-group' : 'solo'}>
        ${g.turn ? html`<div class="group-head small"><span class="muted turn-name" title="turn ${g.turn}">${turnLabel(h, g.turn, g.entries[0]?.at)}</span>
            <button class="link" @click=${() => h.openReplay(g.turn)}>Replay</button>
            <button class="link" @click=${() => h.openChanges(g.turn)}>Changes</button></div>` : nothing}
        <ol>${g.entries.map((e) => entryView(h, e))}</ol>
      </li>`)}
    </ol>
    ${h.loading ? html`<p class="muted small">Loading…</p>` : nothing}
    ${h.more && !h.loading ? html`<button class="link" @click=${() => h.load()}>Load more</button>` : nothing}
    ${!h.loading && !h.error && !h.entries.length ? html`<p class="muted small">Nothing of these kinds happened in this Session.</p>` : nothing}
    <footer class="history-foot small">
      ${h.head
        ? html`Audit head: seq ${h.head.seq.toLocaleString()} · <code title=${h.head.hash}>${shortHash(h.head.hash)}</code>
            <button class="link" @click=${() => copy(app, h.head)}>Copy</button>`
        : nothing}
    </footer>
  </div>`;
}

/**
 * replayPart is the n-th replayed answer as a conversation text part, kept
 * on the tool across renders so its Markdown renders again only when its
 * text grew.
 */
function replayPart(tool, n, text) {
  tool.parts ??= [];
  const p = (tool.parts[n] ??= { kind: 'text', text: '' });
  p.text = text;
  return p;
}

/** turnLabel names a turn by its message's first words and its time (the conversation has the message). */
function turnLabel(h, turn, at) {
  const t = h.app.state.turns.get(h.session)?.turns.find((x) => x.turn_id === turn);
  return turnName(t?.display_input, at ? timeOf(at) : '');
}

function entryView(h, e) {
  const viewing = h.past?.seq === e.seq;
  const future = h.past && e.seq > h.past.seq; // after the point in view
  return html`<li class="entry k-${e.kind} ${viewing ? 'viewing' : ''} ${future ? 'future' : ''}" data-seq=${e.seq}>
    <button class="entry-btn" aria-pressed=${viewing ? 'true' : 'false'} title="Show the Session as of seq ${e.seq}" @click=${() => h.viewAt(e.seq)}>
      <time datetime=${e.at}>${timeOf(e.at)}</time>
      <span class="chip actor a-${e.actor?.kind}">${actorText(e.actor, { [e.actor?.id]: e.actor_name })}</span>
      <span class="summary" title=${e.summary}>${e.action}</span>
    </button>
  </li>`;
}

function turnToolView(h) {
  const tool = h.turnTool;
  return html`<section class="turn-tool" aria-label=${tool.mode === 'replay' ? 'Replay of the turn' : 'Changes of the turn'}>
    <div class="turn-tool-head"><strong>${tool.mode === 'replay' ? 'Replay' : 'Changes'}</strong> <span class="muted small" title="turn ${tool.turn}">${turnLabel(h, tool.turn)}</span>
      <span class="spacer"></span><button class="icon" aria-label="Close" @click=${() => { h.closeTurn(); h.app.update(); }}>×</button></div>
    ${tool.error ? html`<p class="banner error" role="alert">${tool.error}</p>` : nothing}
    ${tool.mode === 'replay' ? replayView(h, tool) : changesView(h, tool)}
  </section>`;
}

function replayView(h, tool) {
  if (!tool.frames) return tool.error ? nothing : html`<p class="muted small">Loading the turn…</p>`;
  const st = replayState(tool.frames.slice(0, tool.played));
  const ends = { 'session-done': 'Done', 'session-cancelled': 'Stopped', 'session-error': 'Failed' };
  return html`<div class="replay-bar" role="group" aria-label="Playback">
      ${tool.playing ? html`<button @click=${() => h.pause()}>Pause</button>` : html`<button @click=${() => h.play()}>${tool.played >= tool.frames.length ? 'Play again' : 'Play'}</button>`}
      ${SPEEDS.map((sp) => html`<button aria-pressed=${tool.speed === sp ? 'true' : 'false'} @click=${() => h.setSpeed(sp)}>${sp}×</button>`)}
      <span class="muted small" role="status">frame ${tool.played} of ${tool.frames.length}${tool.complete === false ? ' (the turn is still running)' : ''}</span>
    </div>
    <div class="replay small">
      ${st.items.map((x, i) => x.kind === 'reasoning'
        ? html`<details class="reasoning"><summary>Reasoning</summary><p>${x.text}</p></details>`
        : x.kind === 'token'
          ? html`<div class="replay-text">${answerView(h.app, replayPart(tool, i, x.text))}</div>`
          : html`<div class="tool-card ${x.isError ? 'tc-error' : ''}"><code>${x.name}</code> ${x.done ? `${x.isError ? '✗ failed' : '✓'} ${x.ms ?? ''} ms` : '… running'}</div>`)}
      ${st.end ? html`<p class="replay-end"><span class="badge">${ends[st.end]}</span> ${st.error}</p>` : nothing}
    </div>`;
}

function changesView(h, tool) {
  if (!tool.list) return tool.error ? nothing : html`<p class="muted small">Reading the turn's changes…</p>`;
  const files = tool.list.files;
  if (!files.length) return html`<p class="muted small">The turn changed no files.</p>`;
  const chosen = [...tool.chosen];
  return html`<ul class="turn-files small">
      ${files.map((f) => html`<li><label class="check"><input type="checkbox" .checked=${tool.chosen.has(f.path)}
          @change=${(e) => { if (e.target.checked) tool.chosen.add(f.path); else tool.chosen.delete(f.path); h.app.update(); }}>
        <span class="state">${f.status}</span></label> <button class="link" @click=${() => h.showDiff(f.path)}>${f.path}</button></li>`)}
    </ul>
    ${tool.list.truncated ? html`<p class="muted small">Only the first ${files.length} of ${tool.list.total} files are listed.</p>` : nothing}
    ${tool.diff ? (tool.diff.binary ? html`<p class="muted small">${tool.diff.path}: a binary file.</p>` : lineDiffView(h.app, tool.diff, `Diff of ${tool.diff.path}`, { session: h.session, path: tool.diff.path, source: 'a turn\'s changes' })) : nothing}
    <div class="restore-bar">
      <label class="check small"><input type="radio" name="side" .checked=${tool.side === 'before'} @change=${() => { tool.side = 'before'; h.app.update(); }}> as before the turn</label>
      <label class="check small"><input type="radio" name="side" .checked=${tool.side === 'after'} @change=${() => { tool.side = 'after'; h.app.update(); }}> as after it</label>
      <button ?disabled=${!chosen.length || tool.busy} @click=${() => { tool.confirm = { force: false }; h.app.update(); }}>Restore…</button>
    </div>
    ${tool.conflicts
      ? html`<div class="banner warn" role="alert">These files changed after the turn, so nothing was written: ${tool.conflicts.join(', ')}.
          <button class="danger" @click=${() => { tool.confirm = { force: true }; h.app.update(); }}>Restore anyway…</button></div>`
      : nothing}
    ${tool.confirm
      ? html`<div class="confirm" role="alertdialog" aria-label="Confirm the restore">
          <p>${restoreNote(chosen, tool.side)}${tool.confirm.force ? ' Your later changes to those files are overwritten.' : ''}</p>
          <button class=${tool.confirm.force ? 'danger' : 'primary'} ?disabled=${tool.busy} @click=${() => h.restore(tool.confirm.force)}>Restore</button>
          <button @click=${() => { tool.confirm = null; h.app.update(); }}>Cancel</button>
        </div>`
      : nothing}`;
}

function pastView(h) {
  if (h.pastError) return html`<p class="banner error" role="alert">${h.pastError}</p>`;
  const st = h.past.state;
  if (!st) return html`<p class="muted small">Rebuilding the Session as of seq ${h.past.seq}…</p>`;
  const ss = st.session;
  return html`<div class="past" aria-label="The Session as it was">
    <p><b>${ss.name}</b> · ${ss.status} · environment ${ss.environment.state} (generation ${ss.environment.generation})</p>
    <p class="small">${st.turns.length} turn(s) · ${st.attachments.length} attachment(s) · ${st.tasks.length} task(s) · ${st.events} of its events</p>
    ${st.turns.length
      ? html`<ol class="past-turns small">${st.turns.slice(-5).map((t) => html`<li><span class="badge">${t.status}</span> ${typeof t.display_input === 'string' ? t.display_input : typeof t.input === 'string' ? t.input : ''}</li>`)}</ol>`
      : nothing}
  </div>`;
}

function timeOf(at) {
  const d = new Date(at);
  return Number.isNaN(d.getTime()) ? '' : d.toLocaleTimeString();
}

async function copy(app, head) {
  try {
    await navigator.clipboard.writeText(`seq ${head.seq} ${head.hash}`);
    app.toast('Audit head copied: record it elsewhere to prove later that nothing before it changed.');
  } catch (err) {
    app.fail(err, 'Copy');
  }
}
