// The left rail: Workspaces with their Sessions (closed ones under a fold),
// a filter, and the connection's state. Each list of Sessions is virtual
// (railrules.js): only the rows in view are in the DOM, between spacers as
// high as the rows left out, so a thousand Sessions render as one screen.

import { html, nothing, repeat } from '/vendor/lit.js';
import * as S from './store.js';
import { initials, modKey } from './util.js';
import { railToggleLabel, themeView } from './layout.js';
import { createView, sameView, windowOf } from './railrules.js';

/** badge renders a state badge: an icon and a word, never colour alone. */
export function badge(b, extra = '') {
  return html`<span class="badge st-${b.state} ${extra}" data-state=${b.state}><span class="dot" aria-hidden="true">${ICONS[b.state] || '•'}</span>${b.label}</span>`;
}

/** Icons of each badge state; each badge also says its state in words. */
export const ICONS = {
  unprepared: '○',
  awaiting_approval: '?',
  preparing: '◌',
  changing: '◌',
  ready: '●',
  failed: '✕',
  closed: '–',
  unknown: '?',
};

export function railView(app) {
  const st = app.state;
  const ui = app.ui;
  const workspaces = S.workspaceList(st);
  const pending = st.approvals.size;
  const interrupts = app.automations?.interrupts.length || 0; // the tools may be on their way
  ui.railView ??= createView(innerHeight);
  // Until measured, each list's top is guessed from the rows above it.
  const guess = { top: 0 };
  return html`<nav class="rail" aria-label="Workspaces and Sessions">
    <div class="rail-head">
      <button class="icon" aria-label=${railToggleLabel(ui)}
        title="Toggle the rail (${modKey}-\\)" @click=${() => app.toggleRail()}>☰</button>
      <span class="brand">Lathe</span>
      <button class="icon" aria-label="Command palette" title="Command palette (${modKey}-K)" @click=${() => app.palette?.show('')}>⌘</button>
      ${themeView(app)}
    </div>
    <div class="rail-body" @scroll=${() => measureRail(app)}>
      <div class="rail-actions">
        <button @click=${() => app.dialogs?.open('session')} ?disabled=${!workspaces.length}>+ Session</button>
        <button @click=${() => app.dialogs?.open('workspace')}>+ Workspace</button>
        <button class="rail-mcp" aria-current=${app.ui.route.view === 'mcp' ? 'page' : 'false'} title="MCP servers, tools and saved decisions"
          @click=${() => app.mcp?.show()}>MCP servers${pending ? html` <span class="badge st-awaiting_approval" aria-label="${pending} awaiting approval">? ${pending}</span>` : nothing}</button>
        <button class="rail-automations" aria-current=${app.ui.route.view === 'automations' ? 'page' : 'false'} title="Automations: graphs of Agents, tools and checkpoints"
          @click=${() => app.automations?.show()}>Automations${interrupts ? html` <span class="badge st-awaiting_approval" aria-label="${interrupts} awaiting an answer">? ${interrupts}</span>` : nothing}</button>
        <button class="rail-chats" aria-current=${app.ui.route.view === 'chats' ? 'page' : 'false'} title="Chats with an Agent, outside any Session"
          @click=${() => app.chats?.show()}>Chats</button>
        <button class="rail-files" aria-current=${app.ui.route.view === 'files' ? 'page' : 'false'} title="The shared file store Chats attach from"
          @click=${() => app.filestore?.show()}>Shared files</button>
      </div>
      <label class="filter"><span class="sr-only">Filter Sessions</span>
        <input type="search" placeholder="Filter Sessions" .value=${ui.filter}
          @input=${(e) => { ui.filter = e.target.value; app.update(); }}>
      </label>
      ${!ui.hydrated && !workspaces.length ? html`<p class="muted pad">Loading…</p>` : nothing}
      ${ui.hydrated && !workspaces.length ? html`<p class="muted pad">No Workspaces yet.</p>` : nothing}
      <ul class="workspaces">
        ${repeat(workspaces, (w) => w.id, (w) => workspaceItem(app, w, guess))}
      </ul>
    </div>
    ${connView(app)}
  </nav>`;
}

/** shownOf is a Workspace's Sessions, open and closed, and those of each the filter shows. */
function shownOf(app, workspaceId) {
  const filter = app.ui.filter.trim().toLowerCase();
  const match = (s) => !filter || s.name.toLowerCase().includes(filter);
  const { open, closed } = S.sessionsOf(app.state, workspaceId);
  return { open, closed, shownOpen: open.filter(match), shownClosed: closed.filter(match) };
}

function workspaceItem(app, w, guess) {
  const { open, closed, shownOpen, shownClosed } = shownOf(app, w.id);
  const own = app.state.ownerships.get(w.id);
  const foldOpen = app.ui.filter !== '' || !!app.ui.closedOpen?.has(w.id);
  guess.top += HEAD_PX;
  const openList = sessionList(app, w.id, `Sessions of ${w.name}`, shownOpen, guess.top);
  guess.top += shownOpen.length * app.ui.railView.row + (closed.length ? HEAD_PX : 0);
  const closedList = foldOpen ? sessionList(app, `closed:${w.id}`, `Closed Sessions of ${w.name}`, shownClosed, guess.top) : nothing;
  if (foldOpen) guess.top += shownClosed.length * app.ui.railView.row;
  return html`<li class="workspace" data-workspace=${w.id}>
    <div class="ws-head">
      <span class="ws-name" title=${w.path}>${w.name}</span>
      ${own ? html`<span class="badge st-changing"><span class="dot" aria-hidden="true">◌</span>Ways running</span>` : nothing}
      <span class="ws-tools">
        <button class="icon" aria-label="New Session in ${w.name}" title="New Session" @click=${() => app.dialogs?.open('session', { workspace: w.id })}>+</button>
        <button class="icon" aria-label="Workspace ${w.name} actions" title="Rename or remove"
          @click=${() => app.dialogs?.open('workspace-actions', { workspace: w.id })}>⋯</button>
      </span>
    </div>
    ${openList}
    ${!open.length
      ? html`<ul class="sessions" aria-label="Sessions of ${w.name}"><li class="muted small pad-l">${app.ui.hydrated ? 'No open Sessions' : 'Loading…'}</li></ul>`
      : nothing}
    ${closed.length
      ? html`<details class="closed-fold" ?open=${foldOpen} @toggle=${(e) => foldToggled(app, w.id, e.target.open)}>
          <summary>Closed (${closed.length})</summary>
          ${closedList}
        </details>`
      : nothing}
  </li>`;
}

/** HEAD_PX is a guess at a Workspace's head (or a fold's summary) height, before the rail is measured. */
const HEAD_PX = 26;

/**
 * sessionList renders the rows of list that show in the rail's view: a
 * virtual list keyed by key, whose first row is guessed to be top px down
 * the rail until measured (measureRail).
 */
function sessionList(app, key, label, list, top) {
  if (!list.length) return nothing;
  const v = app.ui.railView;
  const { start, end } = windowOf(list.length, v.tops.get(key) ?? top, v.row, v.y, v.h);
  const pad = `padding-top: ${start * v.row}px; padding-bottom: ${(list.length - end) * v.row}px`;
  return html`<ul class="sessions" aria-label=${label} data-rows=${key} style=${pad}>
    ${repeat(list.slice(start, end), (s) => s.id, (s, i) => sessionItem(app, s, start + i + 1, list.length))}
  </ul>`;
}

/** foldToggled remembers a closed fold opened or shut, and renders its rows. */
function foldToggled(app, id, open) {
  app.ui.closedOpen ??= new Set();
  if (open === app.ui.closedOpen.has(id)) return;
  if (open) app.ui.closedOpen.add(id);
  else app.ui.closedOpen.delete(id);
  app.update();
}

/**
 * revealSession scrolls the rail so that Session id's row is in view (a
 * virtual list holds only the rows in view): after Alt-↑/↓ moved to it.
 */
export function revealSession(app, id) {
  const s = app.state.sessions.get(id);
  const body = app.root.querySelector('.rail-body');
  const v = app.ui.railView;
  if (!s || !body || !v) return;
  const closed = s.status === 'closed';
  const top = v.tops.get(closed ? `closed:${s.workspace_id}` : s.workspace_id);
  if (top === undefined) return; // its list is not shown (a shut fold)
  const { shownOpen, shownClosed } = shownOf(app, s.workspace_id);
  const i = (closed ? shownClosed : shownOpen).findIndex((x) => x.id === id);
  if (i < 0) return; // the filter hides it
  const y = top + i * v.row;
  if (y < body.scrollTop) body.scrollTop = Math.floor(y);
  else if (y + v.row > body.scrollTop + body.clientHeight) body.scrollTop = y + v.row - body.clientHeight;
}

/**
 * measureRail reads where the rail's lists are and how far it is scrolled,
 * after a render or a scroll, and renders again when that moved the rows
 * in view. App.update calls it after each render.
 */
export function measureRail(app) {
  const body = app.root.querySelector('.rail-body');
  const v = app.ui.railView;
  if (!body || !v) return;
  const top = body.getBoundingClientRect().top - body.scrollTop;
  const row = body.querySelector('.sessions[data-rows] > .session-item')?.offsetHeight || v.row;
  const next = { y: body.scrollTop, h: body.clientHeight || innerHeight, row, tops: new Map(), measured: true };
  for (const ul of body.querySelectorAll('ul[data-rows]')) next.tops.set(ul.dataset.rows, ul.getBoundingClientRect().top - top);
  if (sameView(v, next)) return;
  app.ui.railView = next;
  app.update();
}

function sessionItem(app, s, pos, size) {
  const current = app.ui.route.session === s.id;
  const b = S.sessionBadge(app.state, s, app.ui.conn.status);
  const turn = S.activeTurn(app.state, s.id);
  const waiting = S.approvalsOf(app.state, s.id).length;
  const branch = S.worktreeBranch(s);
  return html`<li class="session-item" aria-posinset=${pos} aria-setsize=${size}>
    <a href="#/sessions/${encodeURIComponent(s.id)}" aria-current=${current ? 'page' : 'false'}
      aria-label="${s.name}, ${b.label}${branch ? `, on branch ${branch}` : ''}${waiting ? ', awaiting approval' : turn ? ', working' : ''}" title="${s.name} · ${b.label}"
      @click=${() => { app.ui.railOpen = false; }}>
      <span class="dot st-${b.state}" aria-hidden="true">${ICONS[b.state]}</span>
      <span class="session-name">${s.name}</span>
      ${branch ? html`<span class="branch-chip" title="Its own worktree, on branch ${branch}" aria-hidden="true">⎇ branch</span>` : nothing}
      <span class="session-initials" aria-hidden="true">${initials(s.name)}</span>
      ${waiting
        ? html`<span class="badge st-awaiting_approval session-approval" title="A tool call awaits your approval"><span class="dot" aria-hidden="true">?</span>approval</span>`
        : turn ? html`<span class="streaming" title="A turn is running">working</span>` : nothing}
    </a>
  </li>`;
}

function connView(app) {
  const c = app.ui.conn;
  let text;
  let cls = c.status;
  switch (c.status) {
    case 'live':
      text = 'Live';
      break;
    case 'hydrating':
      text = 'Loading state…';
      break;
    case 'connecting':
      text = 'Connecting…';
      break;
    default: {
      const w = S.connWords(c);
      text = html`${w.text} <span class="why">Offline: ${w.why}.</span>`;
      cls = 'offline';
    }
  }
  return html`<div class="conn ${cls}" role="status" aria-live="polite" data-conn=${c.status}>
    <span class="dot" aria-hidden="true">${c.status === 'live' ? '●' : '○'}</span>
    <span class="conn-text">${text}</span>
    ${c.status === 'offline' ? html`<button class="link" @click=${() => app.live.retryNow()}>Retry now</button>` : nothing}
  </div>`;
}
