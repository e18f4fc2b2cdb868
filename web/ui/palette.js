// The command palette (Ctrl/Cmd-K): switch Session, open a file, run a task,
// and every workbench action. Ctrl/Cmd-P opens it on files ("/" prefix).

import { html, nothing, ref, live } from '/vendor/lit.js';
import * as S from './store.js';
import { showModal } from './dialogs.js';
import { THEMES, theme, setTheme } from './util.js';

export class Palette {
  constructor(app) {
    this.app = app;
    this.open = false;
    this.query = '';
    this.index = 0;
  }

  show(query) {
    this.open = true;
    this.query = query;
    this.index = 0;
    this.app.update();
  }

  hide() {
    this.open = false;
    this.app.update();
  }

  /** items lists the commands matching the query, best first. */
  items() {
    const app = this.app;
    const st = app.state;
    const cur = app.ui.route.session;
    const files = this.query.startsWith('/');
    const q = (files ? this.query.slice(1) : this.query).trim();
    const out = [];
    if (files) {
      for (const p of app.files.knownFiles()) out.push({ group: 'File', label: p, run: () => app.files.open(p) });
    } else {
      for (const w of S.workspaceList(st)) {
        const { open, closed } = S.sessionsOf(st, w.id);
        for (const s of [...open, ...closed]) {
          const b = S.sessionBadge(st, s, app.ui.conn.status);
          out.push({ group: 'Session', label: s.name, detail: `${w.name} · ${b.label}`, run: () => app.openSession(s.id) });
        }
      }
      const actions = [
        ['New Session…', () => app.dialogs.open('session'), st.workspaces.size > 0],
        ['New Lattice Session (a team of Agents)…', () => app.dialogs.open('session', { mode: 'lattice' }), st.workspaces.size > 0 && !!app.ui.lattice?.workers?.length],
        ['Add a Workspace…', () => app.dialogs.open('workspace'), true],
        ['Open a file…', () => this.show('/'), !!cur],
        ['New terminal', () => app.dock.newTerminal(), !!cur && app.runtimeState(cur).usable],
        ['Show Files', () => app.showTool('files'), !!cur],
        ['Show the environment review', () => app.showTool('environment'), !!cur],
        ['Rebuild the environment', () => app.environment.rebuild(st.sessions.get(cur)), !!cur && st.sessions.get(cur)?.environment.state !== 'awaiting_approval'],
        ['Reference the selected lines', () => app.files.reference(), !!app.files.selection],
        ['MCP servers, tools and saved decisions', () => app.mcp.show(), true],
        ['Chats', () => app.chats.show(), true],
        ['Shared files', () => app.filestore.show(), true],
        ['Toggle the rail', () => app.toggleRail(), true],
        [`Theme: switch to ${THEMES[(THEMES.indexOf(theme()) + 1) % THEMES.length]}`, () => setTheme(THEMES[(THEMES.indexOf(theme()) + 1) % THEMES.length]), true],
        ['Toggle the terminal dock', () => app.toggleDock(), !!cur],
      ];
      for (const [label, run, ok] of actions) if (ok) out.push({ group: 'Action', label, run });
      // Plain text searches: the search ranks above the task, so Enter on
      // what was typed never runs it. A shell task runs only when its
      // "Run task:" line is chosen.
      if (q && cur) out.push({ group: 'Search', label: `Search the turns for: ${q}`, run: () => app.conversation.find(q), always: 0.6 });
      if (q && cur && app.runtimeState(cur).usable) {
        out.push({ group: 'Task', label: `Run task: ${q}`, detail: 'in the sandbox, in the background', run: () => app.dock.runTask(q), always: 0.4 });
      }
    }
    if (!q) return out.slice(0, 50);
    const scored = [];
    for (const it of out) {
      const s = it.always ? it.always : score(q.toLowerCase(), `${it.label} ${it.detail || ''}`.toLowerCase());
      if (s > 0) scored.push([s, it]);
    }
    scored.sort((a, b) => b[0] - a[0]);
    return scored.slice(0, 50).map(([, it]) => it);
  }

  run(item) {
    this.open = false;
    item.run();
    this.app.update();
  }
}

/**
 * score rates how well q matches text: 0 when its characters are not all in
 * order; more for a substring match, an earlier one, and a shorter text.
 */
export function score(q, text) {
  const at = text.indexOf(q);
  if (at >= 0) return 10 - Math.min(at, 8) + 1 / (1 + text.length);
  let i = 0;
  for (const ch of text) if (ch === q[i]) i++;
  return i === q.length ? 1 + 1 / (1 + text.length) : 0;
}

function focusInput(el) {
  if (el) requestAnimationFrame(() => el.focus());
}

export function paletteView(app) {
  const p = app.palette;
  if (!p.open) return nothing;
  const items = p.items();
  p.index = Math.min(p.index, Math.max(0, items.length - 1));
  const onKey = (e) => {
    // The matches of the query as typed now: a keystroke can come before
    // the render of the one before it.
    p.query = e.target.value;
    const now = p.items();
    if (e.key === 'ArrowDown' || e.key === 'ArrowUp') {
      e.preventDefault();
      p.index = (p.index + (e.key === 'ArrowDown' ? 1 : -1) + now.length) % Math.max(1, now.length);
      app.update();
    } else if (e.key === 'Enter') {
      e.preventDefault();
      const it = now[Math.min(p.index, now.length - 1)];
      if (it) p.run(it);
    }
  };
  return html`<dialog class="palette" aria-label="Command palette" ${ref(showModal)}
      @close=${() => { if (p.open) p.hide(); }}>
    <input type="text" role="combobox" aria-expanded="true" aria-controls="palette-list" aria-autocomplete="list"
      aria-label="Command" aria-activedescendant=${items.length ? `palette-${p.index}` : ''}
      placeholder="Switch Session, run an action, / to open a file, or type to search the turns"
      .value=${live(p.query)} @input=${(e) => { p.query = e.target.value; p.index = 0; app.update(); }} @keydown=${onKey}
      ${ref(focusInput)}>
    <ul id="palette-list" role="listbox" aria-label="Matches">
      ${items.map((it, i) => html`<li id="palette-${i}" role="option" aria-selected=${i === p.index ? 'true' : 'false'}
        @click=${() => p.run(it)} @mousemove=${() => { if (p.index !== i) { p.index = i; app.update(); } }}>
        <span class="group">${it.group}</span> <span class="label">${it.label}</span>
        ${it.detail ? html`<span class="muted small"> ${it.detail}</span>` : nothing}</li>`)}
      ${!items.length ? html`<li class="muted small pad" role="option" aria-disabled="true">${p.query.startsWith('/') ? 'No known files match; expand folders in the tree to find more.' : 'Nothing matches.'}</li>` : nothing}
    </ul>
  </dialog>`;
}
