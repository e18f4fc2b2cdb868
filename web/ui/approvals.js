// MCP tool-call approvals: a call parked for a decision shows in every open
// tab, above the composer, with its tool, server, Agent and arguments preview, Allow and Deny,
// and the four ways to remember the decision in words. Resolving it
// anywhere closes it everywhere (store.applyApprovalFrame).

import { html, nothing } from '/vendor/lit.js';
import * as S from './store.js';
import { SCOPES, scopeDetail, previewArguments } from './mcprules.js';

const chosen = new Map(); // approval id → the persist choice picked in this tab

function decide(app, a, decision) {
  const persist = chosen.get(a.approval_id) || 'once';
  if (!app.live.send({ cmd: 'mcp-approve', approval_id: a.approval_id, decision, persist })) {
    app.toast('Offline: the decision was not sent; try again once the connection is back.', 'error');
    return;
  }
  S.markDecided(app.state, a.approval_id, decision);
  app.update();
}

export function approvalsView(app) {
  const list = S.approvalsOf(app.state);
  for (const id of chosen.keys()) if (!app.state.approvals.has(id)) chosen.delete(id);
  if (!list.length) return nothing;
  const cur = app.ui.route.session;
  return html`<section class="approvals" aria-label="Tool calls awaiting approval">
    ${list.map((a) => card(app, a, cur))}
  </section>`;
}

function card(app, a, cur) {
  const id = a.approval_id;
  const titleId = `approval-${id}`;
  const pick = chosen.get(id) || 'once';
  const s = a.session && app.state.sessions.get(a.session);
  const args = previewArguments(a.arguments_preview);
  return html`<div class="approval-card" role="group" aria-labelledby=${titleId} data-approval=${id}>
    <p id=${titleId} class="approval-title"><span aria-hidden="true">?</span> <b>Allow this tool call?</b>
      Agent <b class="approval-agent">${a.agent_id || 'unknown'}</b> calls tool <code>${a.tool}</code> of server
      <code>${a.server}</code>${s && a.session !== cur
        ? html` in Session <a href="#/sessions/${encodeURIComponent(s.id)}">${s.name}</a>`
        : nothing}</p>
    ${args
      ? html`<details class="approval-args" open><summary>Arguments</summary><pre class="command">${args}</pre></details>`
      : html`<p class="muted small">No arguments.</p>`}
    <fieldset class="approval-scope" ?disabled=${!!a.sent}>
      <legend>Remember the decision</legend>
      <div class="scope-grid">
      ${SCOPES.map((sc) => html`<label class="radio" title=${scopeDetail(sc.value, a)}>
        <input type="radio" name="scope-${id}" value=${sc.value} .checked=${pick === sc.value}
          @change=${() => { chosen.set(id, sc.value); app.update(); }}>
        ${sc.label}</label>`)}
      </div>
    </fieldset>
    <div class="row approval-actions">
      <button class="primary" ?disabled=${!!a.sent} @click=${() => decide(app, a, 'allow')}>Allow</button>
      <button class="danger" ?disabled=${!!a.sent} @click=${() => decide(app, a, 'deny')}>Deny</button>
      <span class="muted small">Covers: ${scopeDetail(pick, a)}.</span>
      ${a.sent ? html`<span class="muted small" role="status">${a.sent === 'allow' ? 'Allowed' : 'Denied'}; waiting for the daemon…</span>` : nothing}
    </div>
  </div>`;
}
