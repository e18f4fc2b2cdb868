// MCP tool-call approvals: a call parked for a decision shows in every open
// tab with its tool, server and an arguments preview, and the four ways to
// remember the decision. Resolving it anywhere closes it everywhere
// (mcp-approval-resolved).

import { html, nothing } from '/vendor/lit.js';

/** The persist choices of an approval, as the mcp-approve command names them. */
export const PERSIST = [
  ['once', 'Just this call'],
  ['agent_tool', 'This Agent, this tool'],
  ['agent_server', 'This Agent, every tool of this server'],
  ['any_agent_server', 'Every Agent, every tool of this server'],
];

const persistChoice = new Map(); // approval id → chosen persist

function decide(app, a, decision) {
  const persist = persistChoice.get(a.approval_id) || 'once';
  if (!app.live.send({ cmd: 'mcp-approve', approval_id: a.approval_id, decision, persist })) {
    app.toast('Offline: the decision was not sent; try again once the connection is back.', 'error');
    return;
  }
  a.sent = decision;
  app.update();
}

export function approvalsView(app) {
  const list = [...app.state.approvals.values()];
  if (!list.length) return nothing;
  return html`<section class="approvals" aria-label="Tool calls awaiting approval">
    ${list.map((a) => html`<div class="approval-card" role="alert">
      <p><b>? Approve a tool call:</b> <code>${a.tool_display || a.tool || 'a tool'}</code>
        ${a.server ? html` on server <code>${a.server}</code>` : nothing}
        ${a.agent_id ? html` for Agent <b>${a.agent_id}</b>` : nothing}</p>
      ${a.arguments_preview ? html`<pre class="command">${a.arguments_preview}</pre>` : nothing}
      <div class="row">
        <label>Remember
          <select @change=${(e) => persistChoice.set(a.approval_id, e.target.value)}>
            ${PERSIST.map(([v, label]) => html`<option value=${v} ?selected=${(persistChoice.get(a.approval_id) || 'once') === v}>${label}</option>`)}
          </select></label>
        <button class="primary" ?disabled=${!!a.sent} @click=${() => decide(app, a, 'allow')}>Allow</button>
        <button class="danger" ?disabled=${!!a.sent} @click=${() => decide(app, a, 'deny')}>Deny</button>
        ${a.sent ? html`<span class="muted small">Sent: ${a.sent}</span>` : nothing}
      </div>
    </div>`)}
  </section>`;
}
