// The workbench: boot, the live connection, routing, keyboard shortcuts and
// the root view. The state rules live in store.js; each tool has a module of
// its own (rail, session, env, files, dock, dialogs, palette).
//
// The first load is the rail's: this module imports only what the rail and
// the live state need, reads the first page of the Session list, and shows
// it, while the tools (tools.js) and the rest of the list arrive. The
// hydrate ends (status Live) once both have.

import { html, render, nothing } from '/vendor/lit.js';
import * as S from './store.js';
import { Live, wsURL } from './live.js';
import { api, ApiError, sessionPath } from './api.js';
import { parseRoute, routeHash } from './router.js';
import { mod, persisted, applyTheme } from './util.js';
import { Layout, resizerView, paneSwitcherView, railClass, ICONS } from './layout.js';
import { railView, measureRail, revealSession } from './rail.js';

/** The Session list's first page (what the rail shows first), and the pages after it. */
const FIRST_PAGE = 200;
const PAGE = 2000;

/** TOOLS_AFTER_MS is how long the tools wait for the first page to be asked for. */
const TOOLS_AFTER_MS = 1000;

/** T is the tools module (tools.js) once it has arrived. */
let T = null;

const railPref = persisted('rail-collapsed', false);
const dockPref = persisted('dock-open', true);

/**
 * App is the context every view and tool receives: the server state, the
 * local UI state, the live connection and the tools.
 */
class App {
  constructor(root) {
    this.root = root;
    root.replaceChildren(); // the boot message
    this.state = S.createState();
    this.ui = {
      conn: { status: 'connecting', attempt: 0, retryAt: 0, reason: '' },
      hydrated: false, // the first hydrate finished
      signedOut: false,
      route: parseRoute(location.hash),
      railCollapsed: railPref.get(),
      railOpen: false, // off-canvas rail below 720px
      filter: '',
      inspector: null, // 'files' | 'environment' | null: the tool beside the conversation
      dockOpen: dockPref.get(),
      toasts: [],
      agents: [],
      lattice: null, // the lattice team: {coordinator, workers}
    };
    this.runtime = { session: null, usable: false }; // what the runtime tools are bound to
    this.runtimeTrace = [];
    this.rendering = 0;
    this.live = new Live({
      url: wsURL('/ws'),
      onFrame: (f) => this.frame(f),
      onStatus: (s) => this.connStatus(s),
    });
    this.layout = new Layout(this);
    this.tools = false; // the tools arrived (attach)
  }

  /** attach binds the tools once their modules arrived. */
  attach(m) {
    T = m;
    this.conversation = new m.Conversation(this);
    this.environment = new m.Environment(this);
    this.files = new m.Files(this);
    this.dock = new m.Dock(this);
    this.dialogs = new m.Dialogs(this);
    this.palette = new m.Palette(this);
    this.scm = new m.Scm(this);
    this.preview = new m.Preview(this);
    this.history = new m.History(this);
    this.mcp = new m.Mcp(this);
    this.automations = new m.Automations(this);
    this.chats = new m.Chats(this);
    this.filestore = new m.FileStore(this);
    this.ways = new m.Ways(this);
    this.review = new m.Review(this);
    this.tools = true;
    this.update();
  }

  start() {
    performance.mark('lathe-start');
    applyTheme();
    addEventListener('resize', () => this.update());
    // go() reads a route it set at once; the hashchange that follows finds it read.
    addEventListener('hashchange', () => { if (location.hash !== this.routeRead) this.routeChanged(); });
    addEventListener('keydown', (ev) => this.key(ev));
    addEventListener('online', () => this.live.retryNow());
    document.addEventListener('visibilitychange', () => {
      if (document.visibilityState === 'visible') this.live.retryNow();
    });
    this.live.start();
    this.earlyRecords();
    // The tools load once the first page is in (earlyRecords, snapshot), so
    // that their modules do not queue before it; or soon, if the daemon is slow.
    setTimeout(() => this.loadTools(), TOOLS_AFTER_MS);
    this.update();
  }

  /**
   * earlyRecords asks for the first page at once, beside the live
   * connection: the rail shows it until the hydrate's own read after the
   * snapshot (the canonical one) replaces it.
   */
  async earlyRecords() {
    let records;
    try {
      records = await Promise.all([api('GET', '/api/workspaces'), api('GET', `/api/sessions?limit=${FIRST_PAGE}`)]);
    } catch {
      return; // the hydrate reads them again, and says what failed
    } finally {
      this.loadTools(); // the first page is in: the tools' modules queue behind nothing the rail needs
    }
    if (this.recordsRead) return; // the hydrate's read came first
    S.startRecords(this.state, ...records);
    this.ui.railShown ||= 1;
    this.update();
  }

  /** loadTools starts loading the tools, once; toolsReady settles when they are bound. */
  loadTools() {
    if (!this.toolsReady) {
      this.toolsReady = import('./tools.js').then((m) => this.attach(m), (err) => {
        this.toolsReady = null; // the next hydrate asks again
        throw err;
      });
      this.loadAgents();
    }
    return this.toolsReady;
  }

  /** update schedules one render on the next animation frame. */
  update() {
    if (this.rendering) return;
    this.rendering = requestAnimationFrame(() => {
      this.rendering = 0;
      render(this.view(), this.root);
      measureRail(this); // renders again when the rail's rows in view moved
      this.conversation?.follow();
      if (this.ui.railShown === 1) {
        // The first render of the rail's Sessions (the first page).
        this.ui.railShown = 2;
        performance.mark('lathe-rail');
      }
      if (this.ui.hydrated && !this.interactive) {
        // The first render of the hydrated state: the time to interactive.
        this.interactive = true;
        performance.mark('lathe-interactive');
      }
    });
  }

  toast(message, kind = 'info') {
    const t = { id: Math.random(), message, kind };
    this.ui.toasts = [...this.ui.toasts.slice(-3), t];
    setTimeout(() => this.dismiss(t.id), kind === 'error' ? 12000 : 5000);
    this.update();
  }

  dismiss(id) {
    this.ui.toasts = this.ui.toasts.filter((t) => t.id !== id);
    this.update();
  }

  /** fail shows a failed request; 401 means the browser is signed out. */
  fail(err, what) {
    if (err instanceof ApiError && err.status === 401) {
      this.ui.signedOut = true;
      this.update();
      return;
    }
    this.toast(what ? `${what}: ${err.message}` : err.message, 'error');
  }

  // -------------------------------------------------------------------------
  // Live state

  connStatus(s) {
    this.ui.conn = { ...this.ui.conn, ...s, status: s.status === 'open' ? 'hydrating' : s.status };
    this.update();
  }

  frame(f) {
    const st = this.state;
    if (!this.tools) {
      this.frameEarly(f);
      return;
    }
    switch (f.kind) {
      case 'ready':
        break;
      case 'snapshot':
        this.snapshot(f);
        break;
      case 'event':
        this.event(f);
        break;
      case 'session-environment-changing':
        S.applyEnvironmentFrame(st, f);
        this.syncRuntime();
        break;
      case 'session-environment-settled':
        S.applyEnvironmentFrame(st, f);
        this.reread(f.session);
        break;
      case 'workspace-attempt-changing':
      case 'workspace-attempt-settled':
        S.applyOwnershipFrame(st, f);
        if (f.kind === 'workspace-attempt-settled') this.rereadWorkspace(f.workspace);
        if (f.session === this.ways.session || this.ways.setID() === f.attempt_set_id) this.ways.load();
        this.syncRuntime();
        break;
      case 'checkout-changed':
        // Something wrote in the checkout, whoever it was: re-read what shows it.
        if (f.session === this.ui.route.session) {
          this.files.revalidate();
          this.scm.revalidate();
        }
        break;
      case 'lane-started':
      case 'lane-verified':
        this.ways.frame(f);
        break;
      case 'session-accepted':
      case 'session-start':
      case 'token':
      case 'reasoning':
      case 'tool-call':
      case 'coordinator-plan':
      case 'turn-plan':
      case 'session-done':
      case 'session-cancelled':
      case 'session-error':
      case 'session-stop-rejected':
        if (f.attempt_set_id) {
          this.ways.frame(f); // a Ways lane's stream, not a Session turn's
          break;
        }
        S.applyTurnFrame(st, f);
        // An accepted turn consumed the next-turn attachments.
        if (f.kind === 'session-accepted' && f.session === this.ui.route.session) this.conversation.loadAttachments(f.session);
        if (f.kind === 'session-done' || f.kind === 'session-cancelled' || f.kind === 'session-error') {
          // The turn may have changed files and tasks.
          if (f.session === this.ui.route.session) {
            this.files.revalidate();
            this.scm.revalidate();
          }
          // The durable record adds what frames do not carry (cost, whole steps).
          if (f.session === this.ui.route.session && !f.rejected) this.conversation.load(f.session, { attachments: false });
        }
        break;
      case 'mcp-approval-required':
      case 'mcp-approval-resolved':
      case 'mcp-approval-unknown': {
        const notice = S.applyApprovalFrame(st, f);
        if (notice) this.toast(notice);
        // A decision may have been saved: the MCP panel's list re-reads.
        if (f.kind === 'mcp-approval-resolved') this.mcp.permissionsChanged();
        break;
      }
      case 'chat-start':
      case 'chat-token':
      case 'chat-reasoning':
      case 'chat-tool-start':
      case 'chat-tool-result':
      case 'chat-done':
      case 'chat-stopped':
      case 'chat-error':
        this.chats.frame(f); // it renders when it needs to
        return;
      case 'error':
        if (S.failSending(st, f.message) === null) this.toast(`Live feed: ${f.message}`, 'error');
        break;
      default:
        return;
    }
    this.update();
  }

  /**
   * frameEarly applies a frame that arrives before the tools: what changes
   * the state only. The hydrate's end re-reads what the tools show.
   */
  frameEarly(f) {
    const st = this.state;
    const k = f.kind;
    if (k === 'snapshot') {
      this.snapshot(f);
      return;
    }
    if (k === 'event') S.applyEvent(st, f);
    else if (k.startsWith('session-environment-')) {
      S.applyEnvironmentFrame(st, f);
      if (k === 'session-environment-settled') this.reread(f.session);
    } else if (k.startsWith('workspace-attempt-')) S.applyOwnershipFrame(st, f);
    else if (TURN_FRAMES.has(k)) {
      if (!f.attempt_set_id) S.applyTurnFrame(st, f); // a Ways lane's are the panel's
    } else if (k.startsWith('mcp-approval-')) S.applyApprovalFrame(st, f);
    else return;
    this.update();
  }

  /**
   * snapshot replaces the live state, then re-reads every canonical record
   * (snapshot rule 4: an empty transition list may mean a whole lifecycle
   * finished while this client was away) before the runtime tools are bound
   * again. Event frames arriving meanwhile are applied after the re-read.
   */
  async snapshot(f) {
    if (!this.ui.hydrated) performance.mark('lathe-snapshot');
    const reread = S.applySnapshot(this.state, f);
    this.ui.conn = { ...this.ui.conn, status: 'hydrating' };
    this.runtime.usable = false; // revalidate whatever was bound before
    const gen = (this.hydrateGen = (this.hydrateGen || 0) + 1);
    try {
      // The rail's first page shows at once; the rest of the list and the
      // tools follow, and the hydrate ends when all have arrived.
      const records = Promise.all([api('GET', '/api/workspaces'), api('GET', `/api/sessions?limit=${FIRST_PAGE}`)]);
      const tools = this.loadTools();
      const [workspaces, first] = await records;
      if (gen !== this.hydrateGen) return;
      if (!this.ui.hydrated) performance.mark('lathe-records');
      this.recordsRead = true;
      S.startRecords(this.state, workspaces, first);
      this.ui.railShown ||= 1;
      this.update();
      for (let page = first; page.length === (page === first ? FIRST_PAGE : PAGE);) {
        page = await api('GET', `/api/sessions?limit=${PAGE}&after=${encodeURIComponent(page[page.length - 1].id)}`);
        if (gen !== this.hydrateGen) return;
        S.addRecords(this.state, page);
        this.update();
      }
      await tools;
    } catch (err) {
      if (gen !== this.hydrateGen) return;
      this.fail(err, 'Loading Workspaces and Sessions');
      this.state.pending = null;
      // Start over with a fresh connection and snapshot, after the backoff.
      if (!(err instanceof ApiError && err.status === 401)) this.live.drop('could not load the state');
      return;
    }
    if (gen !== this.hydrateGen) return; // a newer connection took over
    S.finishRecords(this.state);
    this.live.resetBackoff();
    this.ui.conn = { ...this.ui.conn, status: 'live', reason: '' };
    this.ui.hydrated = true;
    for (const cmd of S.unsentCommands(this.state)) this.live.send(cmd);
    // The MCP panel re-reads on every (re)connect: on a deep link's first
    // load, and after an outage in which servers may have changed.
    if (this.ui.route.view === 'mcp') this.mcp.load();
    // Pending Interrupts show in every view; the Automations view re-reads too.
    this.automations.loadInterrupts();
    if (this.ui.route.view === 'automations') this.automations.load();
    // Chat frames went to the connection that was lost: the records tell the rest.
    this.chats.reconnected();
    if (this.ui.route.view === 'files') this.filestore.load();
    const cur = this.ui.route.session;
    for (const id of new Set([...reread, ...(cur ? [cur] : [])])) {
      if (this.state.sessions.has(id)) this.conversation.load(id);
    }
    this.routeChanged();
    this.update();
  }

  event(f) {
    this.automations.event(f);
    if (f.aggregate === 'chat') this.chats.changed(f.aggregate_id);
    if (f.aggregate === 'chat' || f.aggregate === 'shared-file') this.filestore.changed();
    // A set's durable change (a lane ended, a Keep phase): Results re-read.
    if (f.aggregate === 'attempt_set' && this.ways.session && WAYS_RELOAD.has(f.type)) this.ways.load();
    const kind = S.applyEvent(this.state, f);
    if (kind === 'task' && f.aggregate_id === this.ui.route.session) {
      this.dock.refresh();
      // A task may have written files: the tree and Source Control re-read.
      this.files.revalidate();
      this.scm.revalidate();
    }
    if (kind) this.syncRuntime();
  }

  /** reread re-reads one Session after its environment settled. */
  async reread(id) {
    if (this.state.deleting.has(id)) return;
    this.state.rereading ??= new Set();
    this.state.rereading.add(id);
    this.syncRuntime();
    try {
      S.setSession(this.state, await api('GET', sessionPath(id)));
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) this.state.sessions.delete(id);
      else this.fail(err, 'Re-reading the Session');
    } finally {
      this.state.rereading.delete(id);
    }
    if (this.tools && id === this.ui.route.session && this.state.sessions.has(id)) this.conversation.load(id);
    this.syncRuntime();
    this.update();
  }

  async rereadWorkspace(workspaceId) {
    const ids = [...this.state.sessions.values()].filter((s) => s.workspace_id === workspaceId).map((s) => s.id);
    await Promise.all(ids.map((id) => this.reread(id)));
  }

  /** runtimeState is store.runtimeState, also suspended while a Session is re-read. */
  runtimeState(id) {
    if (this.state.rereading?.has(id)) return { usable: false, suspended: true, reason: 'Re-reading the Session after its environment settled…' };
    if (this.ui.conn.status !== 'live' && !this.ui.hydrated) return { usable: false, suspended: true, reason: 'Connecting…' };
    return S.runtimeState(this.state, id);
  }

  /**
   * syncRuntime binds the runtime tools (Files, Terminal) to the current
   * Session when its runtime becomes usable, and suspends them when it stops
   * being usable. It is called after every change that can affect it.
   */
  syncRuntime() {
    if (!this.tools) return; // the hydrate's end binds them
    const id = this.ui.route.session;
    const usable = !!id && this.ui.conn.status === 'live' && this.runtimeState(id).usable;
    const prev = this.runtime;
    if (prev.session === id && prev.usable === usable) return;
    this.runtime = { session: id, usable };
    // What the runtime tools were bound to, for the console and the tests.
    this.runtimeTrace.push({ session: id, usable });
    if (this.runtimeTrace.length > 100) this.runtimeTrace.shift();
    if (prev.session !== id) {
      this.files.setSession(id);
      this.dock.setSession(id);
    }
    if (usable) {
      this.files.resume();
      this.dock.resume();
    } else {
      this.files.suspend();
      this.dock.suspend();
    }
    this.update();
  }

  async loadAgents() {
    try {
      this.ui.agents = (await api('GET', '/api/agents')) || [];
      this.ui.lattice = (await api('GET', '/api/lattice')) || null; // the Worker picker's team
    } catch (err) {
      this.fail(err, 'Loading Agents');
    }
    this.update();
  }

  // -------------------------------------------------------------------------
  // Routing

  /** go navigates to a route (a deep link). */
  go(route) {
    const h = routeHash(route);
    if (location.hash !== h) location.hash = h;
    this.routeChanged(); // now, not at the hashchange: what renders next shows where we went
  }

  openSession(id) {
    this.ui.railOpen = false;
    this.go({ session: id });
  }

  routeChanged() {
    const prev = this.ui.route;
    this.routeRead = location.hash;
    const route = parseRoute(location.hash);
    this.ui.route = route;
    if (!this.tools) {
      this.update(); // the hydrate's end loads what the route shows
      return;
    }
    if (route.session !== prev.session) {
      this.ui.inspector = null;
      // Turn search results belong to where they were asked for; a jump
      // has already closed them.
      this.conversation.closeSearch();
      if (route.session && this.state.sessions.has(route.session)) this.conversation.load(route.session);
    }
    const s = route.session && this.state.sessions.get(route.session);
    if (route.view === 'mcp' && prev.view !== 'mcp') this.mcp.load();
    if (route.view === 'automations' && (prev.view !== 'automations' || prev.automation !== route.automation)) this.automations.load();
    if (route.view === 'chats' && (prev.view !== 'chats' || prev.chat !== route.chat)) this.chats.enter(route.chat);
    if (route.view === 'files' && prev.view !== 'files') this.filestore.load();
    this.layout.routed(route, prev, !!INSPECTORS[route.tool]);
    if (INSPECTORS[route.tool]) this.ui.inspector = route.tool;
    else if (s && !this.ui.inspector) {
      const st = s.environment.state;
      this.ui.inspector = st === 'awaiting_approval' || st === 'failed' ? 'environment' : 'files';
    }
    this.syncRuntime();
    if (route.tool === 'files' && route.file && route.session) this.files.open(route.file);
    this.update();
  }

  /** showTool opens a tool in the inspector and records it in the URL. */
  showTool(tool) {
    const session = this.ui.route.session;
    this.ui.inspector = this.ui.inspector === tool && !this.layout.narrow() ? null : tool;
    if (this.layout.narrow()) this.layout.pane = this.ui.inspector ? 'inspector' : 'main';
    if (this.ui.inspector === 'files' && this.files.doc) this.go({ session, tool: 'files', file: this.files.doc.path });
    else this.go({ session, tool: this.ui.inspector });
    this.update();
  }

  /** moveSession selects the previous (-1) or next (+1) Session in the rail. */
  moveSession(delta) {
    const ids = [];
    for (const w of S.workspaceList(this.state)) {
      const { open, closed } = S.sessionsOf(this.state, w.id);
      ids.push(...open.map((s) => s.id), ...closed.map((s) => s.id));
    }
    if (!ids.length) return;
    const i = ids.indexOf(this.ui.route.session);
    const next = ids[(i + delta + ids.length) % ids.length];
    this.openSession(next);
    revealSession(this, next); // the rail's list is virtual: bring the row in
  }

  // -------------------------------------------------------------------------
  // Keyboard

  key(ev) {
    if (ev.defaultPrevented || !this.tools) return;
    const k = ev.key.toLowerCase();
    if (mod(ev) && !ev.altKey && k === 'k') {
      ev.preventDefault();
      this.palette.show('');
    } else if (mod(ev) && !ev.altKey && k === 'p') {
      ev.preventDefault();
      this.palette.show('/');
    } else if (mod(ev) && ev.key === '\\') {
      ev.preventDefault();
      this.toggleRail();
    } else if (ev.altKey && (ev.key === 'ArrowUp' || ev.key === 'ArrowDown')) {
      if (ev.target.closest?.('.cm-editor, .xterm')) return;
      ev.preventDefault();
      this.moveSession(ev.key === 'ArrowUp' ? -1 : 1);
    } else if (ev.key === 'Escape' && !this.dialogs.current && !this.palette.open) {
      // Esc stops the running turn, unless an editor or terminal wants it.
      if (ev.target.closest?.('.cm-editor, .xterm, dialog')) return;
      if (this.conversation.stop(this.ui.route.session)) ev.preventDefault();
    }
  }

  toggleRail() {
    // Up to 1100px the rail is icons; its names open in a flyout over the conversation.
    if (matchMedia(ICONS).matches) {
      this.ui.railOpen = !this.ui.railOpen;
    } else {
      this.ui.railCollapsed = !this.ui.railCollapsed;
      railPref.set(this.ui.railCollapsed);
    }
    this.update();
  }

  toggleDock() {
    this.ui.dockOpen = !this.ui.dockOpen;
    if (this.layout.narrow()) this.layout.pane = this.ui.dockOpen ? 'dock' : 'main';
    dockPref.set(this.ui.dockOpen);
    this.update();
  }

  // -------------------------------------------------------------------------
  // View

  view() {
    const ui = this.ui;
    if (!this.tools) return this.railOnlyView();
    const s = ui.route.session ? this.state.sessions.get(ui.route.session) : null;
    const inspector = s ? ui.inspector : null;
    const cls = ['shell', railClass(ui), inspector ? 'with-inspector' : '', s ? 'with-dock' : ''].join(' ');
    // A narrow window shows one pane at a time: the one the switcher chose, if it exists.
    // Tool calls awaiting approval: above the composer in a Session, else on top.
    const approvals = html`${T.approvalsView(this)}${T.interruptsView(this)}`;
    let pane = this.layout.pane;
    if ((pane === 'inspector' && !inspector) || (pane === 'dock' && !s)) pane = 'main';
    return html`
      <a class="skip" href="#composer-input">Skip to the composer</a>
      ${ui.signedOut ? signedOutView() : nothing}
      <div class=${cls} data-pane=${pane} style=${this.layout.style()}>
        ${railView(this)}
        ${cls.includes('rail-open') ? html`<div class="rail-scrim" aria-hidden="true" @click=${() => { ui.railOpen = false; this.update(); }}></div>` : nothing}
        ${resizerView(this, 'rail')}
        <main class="main" id="main" aria-label="Session">
          ${ui.route.view === 'mcp'
            ? html`${approvals}${T.mcpView(this)}`
            : ui.route.view === 'automations' ? html`${approvals}${T.automationsView(this)}`
            : ui.route.view === 'chats' ? html`${approvals}${T.chatsView(this)}`
            : ui.route.view === 'files' ? html`${approvals}${T.fileStoreView(this)}`
            : s ? T.sessionView(this, s, approvals) : html`${approvals}${emptyView(this)}`}
        </main>
        ${inspector
          ? html`<aside class="inspector" aria-label=${INSPECTORS[inspector].label}>
              ${T[INSPECTORS[inspector].view](this, s)}
            </aside>
            ${resizerView(this, 'insp')}`
          : nothing}
        ${s ? T.dockView(this, s) : nothing}
        ${s && ui.dockOpen ? resizerView(this, 'dock') : nothing}
        ${paneSwitcherView(this, s)}
      </div>
      <div class="toasts" role="status" aria-live="polite">
        ${ui.toasts.map((t) => html`<div class="toast ${t.kind}" role=${t.kind === 'error' ? 'alert' : 'status'}>
          <span>${t.kind === 'error' ? '⚠ ' : ''}${t.message}</span>
          <button class="icon" aria-label="Dismiss" @click=${() => this.dismiss(t.id)}>×</button>
        </div>`)}
      </div>
      ${T.dialogView(this)}
      ${T.paletteView(this)}
    `;
  }

  /** railOnlyView is the first load's view: the rail, and the centre waiting for the tools. */
  railOnlyView() {
    const ui = this.ui;
    return html`<div class="shell ${railClass(ui)}" data-pane="main" style=${this.layout.style()}>
        ${railView(this)}
        ${resizerView(this, 'rail')}
        <main class="main" id="main" aria-label="Session"><div class="empty"><p>Loading the workbench…</p></div></main>
      </div>`;
  }
}

/** TURN_FRAMES are the frames of a Session turn's run (store.applyTurnFrame). */
const TURN_FRAMES = new Set(['session-accepted', 'session-start', 'token', 'reasoning', 'tool-call', 'coordinator-plan', 'turn-plan',
  'session-done', 'session-cancelled', 'session-error', 'session-stop-rejected']);

/** WAYS_RELOAD are the set events after which the Ways panel re-reads Results. */
const WAYS_RELOAD = new Set(['attempt-lane-ended', 'attempt-keep-phase', 'attempt-set-discarded', 'attempt-set-settled', 'attempt-set-judged']);

/** INSPECTORS are the tools beside the conversation, by route name: each view's name in tools.js. */
const INSPECTORS = {
  files: { label: 'Files', view: 'filesView' },
  environment: { label: 'Environment review', view: 'envView' },
  git: { label: 'Source Control', view: 'scmView' },
  preview: { label: 'Preview', view: 'previewView' },
  history: { label: 'History', view: 'historyView' },
  ways: { label: 'Ways', view: 'waysView' },
};

function signedOutView() {
  return html`<div class="banner error" role="alert">
    Signed out: this browser's sign-in is no longer accepted. Run <code>lathe url</code> on the daemon's machine
    and open the link it prints, or <a href="/">sign in again</a>.
  </div>`;
}

function emptyView(app) {
  const ui = app.ui;
  if (ui.route.session && ui.hydrated) {
    return html`<div class="empty"><h1>Session not found</h1>
      <p>No Session has the ID <code>${ui.route.session}</code>. It may have been deleted.</p>
      <p><a href="#/">Back to the workbench</a></p></div>`;
  }
  if (!ui.hydrated) return html`<div class="empty"><p>Connecting to the daemon…</p></div>`;
  const none = app.state.workspaces.size === 0;
  return html`<div class="empty">
    <h1>Lathe</h1>
    ${none
      ? html`<p>Register a Workspace, a folder on this machine, to start a Session in it.</p>
          <p><button class="primary" @click=${() => app.dialogs.open('workspace')}>Add a Workspace…</button></p>`
      : html`<p>Choose a Session in the rail, or start a new one.</p>
          <p><button class="primary" @click=${() => app.dialogs.open('session')}>New Session…</button></p>`}
    <p class="hint">Press <kbd>${navigator.platform.includes('Mac') ? '⌘' : 'Ctrl'}</kbd> <kbd>K</kbd> for the command palette.</p>
  </div>`;
}

const app = new App(document.getElementById('app'));
globalThis.lathe = app; // for the console and the browser tests
app.start();
