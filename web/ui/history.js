// History: a Session's audit trail as a timeline grouped by turn, filtered
// by kind; a scrubber that shows the Session as of any entry (time travel,
// GET …/at/{seq}); and the audit head with the export. Everything is read
// from the daemon, which reads it from the journal: nothing here writes.

import { html, nothing, repeat } from '/vendor/lit.js';
import { api, path, sessionPath } from './api.js';
import { actorText, groupByTurn, KINDS, kindQuery, scrubSeq, shortHash } from './historyrules.js';

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
  }

  /** show binds the view to a Session and loads its first page. */
  show(s) {
    if (s.id === this.session) return;
    this.session = s.id;
    this.reset();
  }

  reset() {
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
    ${h.error ? html`<p class="banner error" role="alert">Could not load the history: ${h.error}
      <button class="link" @click=${() => h.reset()}>Retry</button></p>` : nothing}
    <ol class="timeline" aria-label="Audit trail">
      ${repeat(groups, (g) => `${g.turn}-${g.entries[0].seq}`, (g) => html`<li class=${g.turn ? 'turn-group' : 'solo'}>
        ${g.turn ? html`<div class="group-head muted small">Turn <code>${g.turn}</code></div>` : nothing}
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

function pastView(h) {
  if (h.pastError) return html`<p class="banner error" role="alert">${h.pastError}</p>`;
  const st = h.past.state;
  if (!st) return html`<p class="muted small">Rebuilding the Session as of seq ${h.past.seq}…</p>`;
  const ss = st.session;
  return html`<div class="past" aria-label="The Session as it was">
    <p><b>${ss.name}</b> · ${ss.status} · environment ${ss.environment.state} (generation ${ss.environment.generation})</p>
    <p class="small">${st.turns.length} turn(s) · ${st.attachments.length} attachment(s) · ${st.tasks.length} task(s) · ${st.events} of its events</p>
    ${st.turns.length
      ? html`<ol class="past-turns small">${st.turns.slice(-5).map((t) => html`<li><span class="badge">${t.status}</span> ${t.display_input?.inline ?? t.input?.inline ?? ''}</li>`)}</ol>`
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
