// The terminal dock: the Session's tasks, and a tab per interactive terminal
// (xterm.js over the terminal WebSocket). Every connection starts with the
// terminal's retained scrollback, so the view is cleared before it is
// written: a reconnect, a reload or a 4001 resync never doubles output.

import { html, nothing, ref, repeat } from '/vendor/lit.js';
import { api, sessionPath } from './api.js';
import { wsURL } from './live.js';
import { darkMode } from './util.js';
import { detachedText, endedReason, killable, taskState } from './taskrules.js';

/** Close codes of the terminal WebSocket. */
const CLOSE_RESYNC = 4001; // the client fell behind: clear and reconnect
const CLOSE_NORMAL = 1000; // the process ended; the reason says how

const RETRY = [250, 500, 1000, 2000, 5000];

let xtermModule = null;
/** loadXterm loads xterm.js and its stylesheet once, on first use. */
function loadXterm() {
  if (!xtermModule) {
    const link = document.createElement('link');
    link.rel = 'stylesheet';
    link.href = '/vendor/xterm.css';
    document.head.append(link);
    xtermModule = import('/vendor/xterm.js');
  }
  return xtermModule;
}

function termTheme() {
  return darkMode?.matches
    ? { background: '#15171a', foreground: '#d8dadd', cursor: '#d8dadd', selectionBackground: '#3a4a5e' }
    : { background: '#fbfbfa', foreground: '#1f2328', cursor: '#1f2328', selectionBackground: '#c9daf0' };
}

export class Dock {
  constructor(app) {
    this.app = app;
    this.session = null;
    this.usable = false;
    this.tasks = [];
    this.loaded = false;
    this.error = '';
    this.terms = new Map(); // task id → TermConn
    this.active = 'tasks'; // 'tasks' or a task id
    this.host = null;
    this.busy = false;
    this.killing = new Set(); // task ids a kill is under way for
    this.command = '';
    this.refreshing = null;
    this.observer = new ResizeObserver(() => this.fit());
    this.mountRef = (el) => this.mount(el); // one callback, so lit calls it only when the element changes
    darkMode?.addEventListener('change', () => {
      for (const t of this.terms.values()) if (t.term) t.term.options.theme = termTheme();
    });
  }

  setSession(id) {
    if (id === this.session) return;
    for (const t of this.terms.values()) t.dispose();
    this.terms = new Map();
    this.session = id;
    this.tasks = [];
    this.loaded = false;
    this.error = '';
    this.active = 'tasks';
  }

  suspend() {
    this.usable = false;
    for (const t of this.terms.values()) t.suspend();
  }

  resume() {
    this.usable = true;
    this.refresh();
  }

  /** refresh re-reads the tasks and attaches every live terminal. */
  refresh() {
    if (!this.session || !this.usable) return Promise.resolve();
    if (this.refreshing) {
      // One in flight may have read before the change that asks for this
      // one: read once more after it.
      this.again = true;
      return this.refreshing;
    }
    this.refreshing = this.load().finally(() => {
      this.refreshing = null;
      if (this.again) {
        this.again = false;
        this.refresh();
      }
    });
    return this.refreshing;
  }

  async load() {
    const id = this.session;
    const first = !this.loaded;
    try {
      const tasks = await api('GET', sessionPath(id, '/tasks'));
      if (id !== this.session) return;
      this.tasks = tasks;
      this.loaded = true;
      this.error = '';
    } catch (err) {
      if (id !== this.session) return;
      this.error = err.message;
      this.app.update();
      return;
    }
    for (const task of this.tasks) {
      if (!task.interactive) continue;
      let t = this.terms.get(task.id);
      if (!t && task.terminal_url) {
        t = new TermConn(this, task);
        this.terms.set(task.id, t);
      }
      if (!t) continue;
      t.task = task;
      if (task.terminal_url && this.usable) t.resume();
      else if (!task.terminal_url) t.ended();
    }
    if (this.active !== 'tasks' && !this.terms.has(this.active)) this.active = 'tasks';
    if (first && this.active === 'tasks') {
      // Opening a Session shows its live terminal, if it has one.
      const live = [...this.terms.values()].find((t) => t.task.terminal_url);
      if (live) this.active = live.task.id;
    }
    this.attach();
    this.app.update();
  }

  /** newTerminal starts an interactive bash and opens its tab. */
  async newTerminal() {
    if (!this.usable || this.busy) return;
    this.busy = true;
    this.app.update();
    try {
      const { rows, cols } = await this.size();
      const task = await api('POST', sessionPath(this.session, '/tasks'), { command: 'bash', interactive: true, rows, cols });
      const t = new TermConn(this, task);
      this.terms.set(task.id, t);
      this.active = task.id;
      if (!this.app.ui.dockOpen) this.app.toggleDock();
      this.tasks = [...this.tasks, task];
      t.resume();
      this.attach();
      t.focus();
    } catch (err) {
      this.app.fail(err, 'New terminal');
    } finally {
      this.busy = false;
      this.app.update();
    }
  }

  /** runTask starts a background command. */
  async runTask(command) {
    if (!command.trim() || !this.usable) return;
    try {
      await api('POST', sessionPath(this.session, '/tasks'), { command });
      this.command = '';
      this.active = 'tasks';
      if (!this.app.ui.dockOpen) this.app.toggleDock();
      await this.refresh();
    } catch (err) {
      this.app.fail(err, 'Run task');
    }
  }

  /** kill ends a task in the sandbox (a detached one: nothing else reaches it), then re-reads the tasks. */
  async kill(t) {
    if (this.killing.has(t.id)) return;
    this.killing.add(t.id);
    this.app.update();
    try {
      await api('POST', sessionPath(this.session, `/tasks/${encodeURIComponent(t.id)}/kill`), {});
      this.app.toast(`Killed ${t.command}.`);
    } catch (err) {
      this.app.fail(err, 'Kill task');
    } finally {
      this.killing.delete(t.id);
    }
    await this.refresh();
  }

  /** size is the rows and cols a new terminal gets: what fits the dock. */
  async size() {
    const X = await loadXterm();
    const rect = this.host?.getBoundingClientRect();
    if (!rect || rect.width < 50 || rect.height < 30) return { rows: 24, cols: 80 };
    // Measure one cell with a throwaway terminal.
    const probe = document.createElement('div');
    probe.style.cssText = `position:absolute;visibility:hidden;width:${rect.width}px;height:${rect.height}px`;
    this.host.append(probe);
    const term = new X.Terminal(termOptions());
    const fit = new X.FitAddon();
    term.loadAddon(fit);
    term.open(probe);
    const dims = fit.proposeDimensions();
    term.dispose();
    probe.remove();
    return dims && dims.rows > 0 && dims.cols > 0 ? { rows: dims.rows, cols: dims.cols } : { rows: 24, cols: 80 };
  }

  select(id) {
    this.active = id;
    this.attach();
    this.app.update();
    if (id !== 'tasks') this.terms.get(id)?.focus();
  }

  /** mount is the ref callback of the terminal host element. */
  mount(el) {
    if (el === this.host) return;
    if (this.host) this.observer.unobserve(this.host);
    this.host = el || null;
    if (el) this.observer.observe(el);
    this.attach();
  }

  /** attach shows the active terminal in the host. */
  attach() {
    if (!this.host) return;
    for (const t of this.terms.values()) {
      const shown = t.task.id === this.active;
      if (t.el.parentNode !== this.host) this.host.append(t.el);
      t.el.hidden = !shown;
      if (shown) t.open();
    }
    this.fit();
  }

  fit() {
    const t = this.terms.get(this.active);
    if (t && this.host && this.host.clientHeight > 0 && this.app.ui.dockOpen) t.fitNow();
  }

  close(id) {
    const t = this.terms.get(id);
    if (!t) return;
    t.dispose();
    this.terms.delete(id);
    if (this.active === id) this.active = this.terms.keys().next().value || 'tasks';
    this.attach();
    this.app.update();
  }
}

function termOptions() {
  return {
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace',
    fontSize: 13,
    scrollback: 5000,
    cursorBlink: true,
    theme: termTheme(),
  };
}

/** TermConn is one terminal tab: an xterm.js view and its WebSocket. */
class TermConn {
  constructor(dock, task) {
    this.dock = dock;
    this.task = task;
    this.el = document.createElement('div');
    this.el.className = 'term';
    this.el.dataset.task = task.id;
    this.term = null;
    this.fitter = null;
    this.ws = null;
    this.status = 'connecting'; // connecting | live | exited | suspended | lost
    this.reason = '';
    this.tries = 0;
    this.timer = 0;
    this.disposed = false;
    this.opening = null;
  }

  label() {
    const n = [...this.dock.terms.keys()].indexOf(this.task.id) + 1;
    return `${this.task.command.split(/\s+/)[0] || 'terminal'} ${n}`;
  }

  /** open creates the xterm view once it can be measured. */
  open() {
    if (this.term || this.opening) return this.opening;
    this.opening = loadXterm().then((X) => {
      if (this.disposed) return;
      this.term = new X.Terminal(termOptions());
      this.fitter = new X.FitAddon();
      this.term.loadAddon(this.fitter);
      this.term.open(this.el);
      this.term.onData((d) => {
        this.send(d);
        if (d.includes('\r')) this.settled(); // a command line went in: re-read once its output settles
      });
      this.term.onBinary((d) => this.send(Uint8Array.from(d, (c) => c.charCodeAt(0))));
      this.term.onResize(({ rows, cols }) => this.send(JSON.stringify({ kind: 'resize', rows, cols })));
      this.fitNow();
      this.connect();
    });
    return this.opening;
  }

  /**
   * settled waits until the terminal has been quiet for a moment after a
   * command line, then has the Files tree and Source Control re-read: the
   * command may have changed the checkout.
   */
  settled() {
    this.waiting = true;
    clearTimeout(this.quiet);
    this.quiet = setTimeout(() => {
      this.waiting = false;
      this.dock.app.files.revalidate();
      this.dock.app.scm.revalidate();
    }, 700);
  }

  fitNow() {
    if (!this.term || this.el.hidden || !this.el.isConnected) return;
    try {
      this.fitter.fit();
    } catch {
      // not measurable yet (hidden): the next resize fits it
    }
  }

  focus() {
    this.open()?.then(() => this.term?.focus());
    this.term?.focus();
  }

  send(data) {
    if (this.ws && this.ws.readyState === 1) this.ws.send(data);
  }

  connect() {
    if (this.disposed || !this.term || this.ws || !this.dock.usable || !this.task.terminal_url) return;
    clearTimeout(this.timer);
    const ws = new WebSocket(wsURL(this.task.terminal_url));
    ws.binaryType = 'arraybuffer';
    this.ws = ws;
    this.status = 'connecting';
    let fresh = true;
    ws.onopen = () => {
      this.tries = 0;
      this.status = 'live';
      this.reason = '';
      // The PTY may have another client's size: give it this view's.
      ws.send(JSON.stringify({ kind: 'resize', rows: this.term.rows, cols: this.term.cols }));
      this.dock.app.update();
    };
    ws.onmessage = (ev) => {
      if (this.waiting) this.settled();
      if (fresh) {
        // The first frame is the whole retained scrollback.
        this.term.reset();
        fresh = false;
      }
      if (typeof ev.data === 'string') {
        let f = null;
        try {
          f = JSON.parse(ev.data);
        } catch {
          // not a control frame
        }
        if (f?.kind === 'error') this.dock.app.toast(`Terminal: ${f.message}`, 'error');
        return;
      }
      this.term.write(new Uint8Array(ev.data));
    };
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.disposed || this.status === 'suspended') return;
      if (ev.code === CLOSE_RESYNC) {
        // Fell behind the output: clear the view and take a fresh scrollback.
        this.term.reset();
        this.connect();
        return;
      }
      if (ev.code === CLOSE_NORMAL) {
        this.status = 'exited';
        this.reason = ev.reason || 'the process ended';
        this.dock.refresh();
        this.dock.app.update();
        return;
      }
      this.status = 'lost';
      this.reason = ev.reason || 'connection lost';
      const delay = RETRY[Math.min(this.tries++, RETRY.length - 1)];
      this.timer = setTimeout(() => this.dock.refresh(), delay);
      this.dock.app.update();
    };
  }

  /** resume reconnects after a suspension or a lost connection. */
  resume() {
    if (this.status === 'suspended' || this.status === 'lost') this.status = 'connecting';
    if (this.status === 'exited') return;
    if (this.term) this.connect();
  }

  suspend() {
    this.status = 'suspended';
    clearTimeout(this.timer);
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.close(1000, 'suspended');
    }
  }

  /** ended marks a terminal whose process is gone (no terminal URL any more). */
  ended() {
    if (this.status !== 'exited') {
      this.status = 'exited';
      this.reason = endedReason(this.task);
    }
  }

  dispose() {
    this.disposed = true;
    clearTimeout(this.timer);
    clearTimeout(this.quiet);
    if (this.ws) this.ws.close(1000, 'closed');
    this.ws = null;
    this.term?.dispose();
    this.el.remove();
  }
}

// ---------------------------------------------------------------------------
// View

export function dockView(app, s) {
  const dock = app.dock;
  const open = app.ui.dockOpen;
  const rt = app.runtimeState(s.id);
  const terms = [...dock.terms.values()];
  const onTabKey = (e) => {
    const ids = ['tasks', ...terms.map((t) => t.task.id)];
    const i = ids.indexOf(dock.active);
    if (e.key === 'ArrowRight' || e.key === 'ArrowLeft') {
      e.preventDefault();
      const next = ids[(i + (e.key === 'ArrowRight' ? 1 : -1) + ids.length) % ids.length];
      dock.select(next);
      e.currentTarget.querySelector(`[data-tab="${next}"]`)?.focus();
    }
  };
  const active = dock.terms.get(dock.active);
  return html`<section class="dock ${open ? '' : 'collapsed'}" aria-label="Terminal dock">
    <div class="dock-bar">
      <div class="tabs" role="tablist" aria-label="Tasks and terminals" @keydown=${onTabKey}>
        <button role="tab" data-tab="tasks" aria-selected=${dock.active === 'tasks' ? 'true' : 'false'} tabindex=${dock.active === 'tasks' ? 0 : -1}
          aria-controls="dock-panel" @click=${() => dock.select('tasks')}>Tasks${dock.tasks.length ? ` (${dock.tasks.length})` : ''}</button>
        ${repeat(terms, (t) => t.task.id, (t) => html`<button role="tab" data-tab=${t.task.id} aria-selected=${dock.active === t.task.id ? 'true' : 'false'}
          tabindex=${dock.active === t.task.id ? 0 : -1} aria-controls="dock-panel" @click=${() => dock.select(t.task.id)}>
          ${t.label()} <span class="tab-state">${termState(t)}</span></button>`)}
      </div>
      <button @click=${() => dock.newTerminal()} ?disabled=${!rt.usable || dock.busy}>+ Terminal</button>
      <span class="spacer"></span>
      ${active && active.status === 'exited' ? html`<button class="link" @click=${() => dock.close(active.task.id)}>Close tab</button>` : nothing}
      <button class="icon" aria-expanded=${open ? 'true' : 'false'} aria-controls="dock-panel"
        aria-label=${open ? 'Hide the terminal dock' : 'Show the terminal dock'} @click=${() => app.toggleDock()}>${open ? '▾' : '▴'}</button>
    </div>
    <div class="dock-body" id="dock-panel" role="tabpanel" ?hidden=${!open}>
      ${!rt.usable ? html`<p class="banner ${rt.suspended ? '' : 'muted'}" role="status">${rt.suspended ? '◌ ' : ''}${rt.reason}${rt.suspended ? ' Terminals are suspended until it settles; they reconnect after.' : ''}</p>` : nothing}
      ${active && active.status !== 'live' && active.status !== 'connecting' && rt.usable
        ? html`<p class="term-status muted small" role="status">${active.status === 'exited' ? `Ended: ${active.reason}` : `Reconnecting: ${active.reason}`}</p>`
        : nothing}
      ${dock.active === 'tasks' ? tasksView(app, dock, rt) : nothing}
      <div class="term-host" ?hidden=${dock.active === 'tasks'} ${ref(dock.mountRef)}></div>
    </div>
  </section>`;
}

function termState(t) {
  switch (t.status) {
    case 'live': return '● live';
    case 'exited': return '– ended';
    case 'suspended': return '◌ suspended';
    case 'lost': return '○ reconnecting';
    default: return '◌ connecting';
  }
}

function tasksView(app, dock, rt) {
  return html`<div class="tasks">
    <form class="row" @submit=${(e) => { e.preventDefault(); dock.runTask(dock.command); }}>
      <label class="grow"><span class="sr-only">Command to run in the background</span>
        <input class="mono" placeholder="Run a command in the background, e.g. make test" .value=${dock.command}
          @input=${(e) => { dock.command = e.target.value; }} ?disabled=${!rt.usable}></label>
      <button type="submit" ?disabled=${!rt.usable}>Run</button>
    </form>
    ${dock.error ? html`<p class="error-text small">⚠ ${dock.error}</p>` : nothing}
    ${dock.loaded && !dock.tasks.length ? html`<p class="muted small">No tasks yet.</p>` : nothing}
    <ul class="task-list">
      ${[...dock.tasks].reverse().map((t) => html`<li class="task">
        <details>
          <summary><code>${t.command}</code> ${taskBadge(t)}${t.interactive ? html` <span class="muted small">terminal</span>` : nothing}</summary>
          ${t.status !== 'detached' && t.error ? html`<p class="error-text small">${t.error}</p>` : nothing}
          ${t.output_tail ? html`<pre class="output">${t.output_tail}</pre>` : html`<p class="muted small">No output kept${t.status === 'running' ? ' yet' : ''}.</p>`}
        </details>
        ${t.status === 'detached' ? html`<div class="row task-detached"><p class="error-text small grow">${detachedText(t)}</p>
          ${killable(t) ? html`<button class="small danger" aria-label="Kill ${t.command}" ?disabled=${dock.killing.has(t.id) || !rt.usable}
            @click=${() => dock.kill(t)}>${dock.killing.has(t.id) ? 'Killing…' : 'Kill'}</button>` : nothing}</div>` : nothing}
      </li>`)}
    </ul>
  </div>`;
}

function taskBadge(t) {
  const st = taskState(t);
  const look = { running: ['st-preparing', '◌'], detached: ['st-preparing', '⚠'], ok: ['st-ready', '✓'], failed: ['st-failed', '✕'] }[st.kind];
  return html`<span class="badge ${look[0]}"><span class="dot" aria-hidden="true">${look[1]}</span>${st.text}</span>`;
}
