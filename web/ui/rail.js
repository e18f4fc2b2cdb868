// The left rail: Workspaces with their Sessions (closed ones under a fold),
// a filter, and the connection's state.

import { html, nothing, repeat } from '/vendor/lit.js';
import * as S from './store.js';
import { initials, modKey } from './util.js';
import { themeView } from './layout.js';

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
  const filter = ui.filter.trim().toLowerCase();
  const match = (s) => !filter || s.name.toLowerCase().includes(filter);
  const workspaces = S.workspaceList(st);
  const pending = st.approvals.size;
  return html`<nav class="rail" aria-label="Workspaces and Sessions">
    <div class="rail-head">
      <button class="icon" aria-label=${ui.railCollapsed ? 'Expand the rail' : 'Collapse the rail'}
        title="Toggle the rail (${modKey}-\\)" @click=${() => app.toggleRail()}>☰</button>
      <span class="brand">Lathe</span>
      <button class="icon" aria-label="Command palette" title="Command palette (${modKey}-K)" @click=${() => app.palette.show('')}>⌘</button>
      ${themeView(app)}
    </div>
    <div class="rail-body">
      <div class="rail-actions">
        <button @click=${() => app.dialogs.open('session')} ?disabled=${!workspaces.length}>+ Session</button>
        <button @click=${() => app.dialogs.open('workspace')}>+ Workspace</button>
        <button class="rail-mcp" aria-current=${app.ui.route.view === 'mcp' ? 'page' : 'false'} title="MCP servers, tools and saved decisions"
          @click=${() => app.mcp.show()}>MCP servers${pending ? html` <span class="badge st-awaiting_approval" aria-label="${pending} awaiting approval">? ${pending}</span>` : nothing}</button>
        <button class="rail-automations" aria-current=${app.ui.route.view === 'automations' ? 'page' : 'false'} title="Automations: graphs of Agents, tools and checkpoints"
          @click=${() => app.automations.show()}>Automations${app.automations.interrupts.length ? html` <span class="badge st-awaiting_approval" aria-label="${app.automations.interrupts.length} awaiting an answer">? ${app.automations.interrupts.length}</span>` : nothing}</button>
        <button class="rail-chats" aria-current=${app.ui.route.view === 'chats' ? 'page' : 'false'} title="Chats with an Agent, outside any Session"
          @click=${() => app.chats.show()}>Chats</button>
        <button class="rail-files" aria-current=${app.ui.route.view === 'files' ? 'page' : 'false'} title="The shared file store Chats attach from"
          @click=${() => app.filestore.show()}>Shared files</button>
      </div>
      <label class="filter"><span class="sr-only">Filter Sessions</span>
        <input type="search" placeholder="Filter Sessions" .value=${ui.filter}
          @input=${(e) => { ui.filter = e.target.value; app.update(); }}>
      </label>
      ${!ui.hydrated && !workspaces.length ? html`<p class="muted pad">Loading…</p>` : nothing}
      ${ui.hydrated && !workspaces.length ? html`<p class="muted pad">No Workspaces yet.</p>` : nothing}
      <ul class="workspaces">
        ${repeat(workspaces, (w) => w.id, (w) => workspaceItem(app, w, match))}
      </ul>
    </div>
    ${connView(app)}
  </nav>`;
}

function workspaceItem(app, w, match) {
  const { open, closed } = S.sessionsOf(app.state, w.id);
  const shownOpen = open.filter(match);
  const shownClosed = closed.filter(match);
  const own = app.state.ownerships.get(w.id);
  return html`<li class="workspace" data-workspace=${w.id}>
    <div class="ws-head">
      <span class="ws-name" title=${w.path}>${w.name}</span>
      ${own ? html`<span class="badge st-changing"><span class="dot" aria-hidden="true">◌</span>Ways running</span>` : nothing}
      <span class="ws-tools">
        <button class="icon" aria-label="New Session in ${w.name}" title="New Session" @click=${() => app.dialogs.open('session', { workspace: w.id })}>+</button>
        <button class="icon" aria-label="Workspace ${w.name} actions" title="Rename or remove"
          @click=${() => app.dialogs.open('workspace-actions', { workspace: w.id })}>⋯</button>
      </span>
    </div>
    <ul class="sessions" aria-label="Sessions of ${w.name}">
      ${repeat(shownOpen, (s) => s.id, (s) => sessionItem(app, s))}
      ${!open.length ? html`<li class="muted small pad-l">No open Sessions</li>` : nothing}
    </ul>
    ${closed.length
      ? html`<details class="closed-fold" ?open=${app.ui.filter !== ''}>
          <summary>Closed (${closed.length})</summary>
          <ul class="sessions">${repeat(shownClosed, (s) => s.id, (s) => sessionItem(app, s))}</ul>
        </details>`
      : nothing}
  </li>`;
}

function sessionItem(app, s) {
  const current = app.ui.route.session === s.id;
  const b = S.sessionBadge(app.state, s, app.ui.conn.status);
  const turn = S.activeTurn(app.state, s.id);
  const waiting = S.approvalsOf(app.state, s.id).length;
  return html`<li class="session-item">
    <a href="#/sessions/${encodeURIComponent(s.id)}" aria-current=${current ? 'page' : 'false'}
      aria-label="${s.name}, ${b.label}${waiting ? ', awaiting approval' : turn ? ', working' : ''}" title="${s.name} · ${b.label}"
      @click=${() => { app.ui.railOpen = false; }}>
      <span class="dot st-${b.state}" aria-hidden="true">${ICONS[b.state]}</span>
      <span class="session-name">${s.name}</span>
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
