// The MCP panel (#/mcp, in the centre): the bundled catalog with an install
// form per entry, the connected servers with their status and error,
// reconnect and remove, their tools, and the saved approval decisions with
// Revoke. Removing a server and revoking a decision confirm first.

import { html, nothing, live } from '/vendor/lit.js';
import { api, path } from './api.js';
import { permissionWords, revokeQuery, revokeCovers, installRequest, serverBadge, scopeLabel, approvalWords } from './mcprules.js';

const enc = encodeURIComponent;

export class Mcp {
  constructor(app) {
    this.app = app;
    this.catalog = null; // [entry] once read
    this.servers = null;
    this.tools = null;
    this.permissions = null;
    this.error = '';
    this.forms = new Map(); // slug → {open, values, name, busy, error}
    this.busy = new Set(); // server names with a request in flight
    this.poll = 0;
    this.gen = 0;
  }

  /** show opens the panel (a deep link) and reads everything. */
  show() {
    this.app.ui.railOpen = false;
    this.app.go({ view: 'mcp' });
  }

  isOpen() {
    return this.app.ui.route.view === 'mcp';
  }

  /** load re-reads the catalog (once), servers, tools and saved decisions. */
  async load() {
    const gen = ++this.gen;
    try {
      const [catalog, servers, tools, permissions] = await Promise.all([
        this.catalog ? Promise.resolve(this.catalog) : api('GET', '/api/mcp/catalog'),
        api('GET', '/api/mcp/servers'),
        api('GET', '/api/mcp/tools'),
        api('GET', '/api/mcp/permissions'),
      ]);
      if (gen !== this.gen) return;
      this.catalog = catalog || [];
      this.servers = servers || [];
      this.tools = tools || [];
      this.permissions = permissions || [];
      this.error = '';
    } catch (err) {
      if (gen !== this.gen) return;
      if (err.status === 401) this.app.fail(err);
      this.error = err.message;
    }
    this.schedulePoll();
    this.app.update();
  }

  /** schedulePoll re-reads while a server is still connecting and the panel shows. */
  schedulePoll() {
    clearTimeout(this.poll);
    if (!this.isOpen() || !(this.servers || []).some((s) => s.status === 'connecting')) return;
    this.poll = setTimeout(() => { if (this.isOpen()) this.load(); }, 1000);
  }

  /** permissionsChanged re-reads the saved decisions (an approval was decided somewhere). */
  async permissionsChanged() {
    if (!this.isOpen()) return;
    try {
      this.permissions = (await api('GET', '/api/mcp/permissions')) || [];
      this.app.update();
    } catch (err) {
      this.app.fail(err, 'Reading the saved decisions');
    }
  }

  form(slug) {
    let f = this.forms.get(slug);
    if (!f) {
      f = { values: {}, name: '', busy: false, error: '' };
      this.forms.set(slug, f);
    }
    return f;
  }

  async install(entry) {
    const f = this.form(entry.slug);
    const { body, missing } = installRequest(entry, f.values, f.name);
    if (missing.length) {
      f.error = `Required: ${missing.join(', ')}.`;
      this.app.update();
      return;
    }
    f.busy = true;
    f.error = '';
    this.app.update();
    try {
      const s = await api('POST', '/api/mcp/install', body);
      f.values = {};
      f.name = '';
      if (s.status === 'failed') this.app.toast(`${s.name} was added but could not start: ${s.error || 'no reason given'}`, 'error');
      else this.app.toast(`${s.name} installed: ${s.status}, ${s.tool_count} tool${s.tool_count === 1 ? '' : 's'}.`);
    } catch (err) {
      if (err.status === 401) this.app.fail(err);
      f.error = err.message;
    } finally {
      f.busy = false;
    }
    await this.load();
  }

  async reconnect(s) {
    this.busy.add(s.name);
    this.app.update();
    try {
      const v = await api('POST', `/api/mcp/servers/${enc(s.name)}`);
      if (v?.status === 'failed') this.app.toast(`${s.name} did not reconnect: ${v.error || 'no reason given'}`, 'error');
    } catch (err) {
      this.app.fail(err, `Reconnecting ${s.name}`);
    } finally {
      this.busy.delete(s.name);
    }
    await this.load();
  }

  remove(s) {
    const tools = (this.tools || []).filter((t) => t.server === s.name).length;
    this.app.dialogs.open('confirm', {
      title: `Remove the server ${s.name}?`,
      body: html`<p>Removing <b>${s.name}</b> disconnects it from the live registry: its ${tools}
        tool${tools === 1 ? '' : 's'} go away for every Agent until it is installed again. Its saved decisions
        stay until revoked. A server from the configuration file comes back when the daemon restarts.</p>`,
      label: 'Remove server',
      cls: 'danger',
      action: async () => {
        await api('DELETE', `/api/mcp/servers/${enc(s.name)}`);
        this.app.toast(`${s.name} removed.`);
        this.load();
      },
    });
  }

  revoke(p) {
    const all = revokeCovers(this.permissions || [], p);
    const others = all.filter((x) => x !== p);
    this.app.dialogs.open('confirm', {
      title: 'Revoke this saved decision?',
      body: html`<p>${permissionWords(p)} (${scopeLabel(p.scope)}). After revoking, the next such call asks again.</p>
        ${others.length
          ? html`<p>This also revokes ${others.length} narrower decision${others.length === 1 ? '' : 's'} it covers:</p>
            <ul>${others.map((x) => html`<li>${permissionWords(x)}</li>`)}</ul>`
          : nothing}`,
      label: all.length > 1 ? `Revoke ${all.length} decisions` : 'Revoke',
      cls: 'danger',
      action: async () => {
        const r = await api('DELETE', path('/api/mcp/permissions', revokeQuery(p)));
        this.app.toast(`Revoked ${r?.revoked ?? 0} saved decision${r?.revoked === 1 ? '' : 's'}.`);
        this.load();
      },
    });
  }
}

export function mcpView(app) {
  const m = app.mcp;
  const loading = m.servers === null && !m.error;
  return html`<div class="mcp panel" role="region" aria-label="MCP">
    <div class="panel-head">
      <h1 class="mcp-title">MCP servers and tools</h1>
      <span class="grow"></span>
      <button @click=${() => m.load()}>Refresh</button>
      <a href="#/" class="button">Close</a>
    </div>
    ${m.error ? html`<p class="error-text pad" role="alert">⚠ ${m.error}</p>` : nothing}
    ${loading ? html`<p class="muted pad">Loading…</p>` : nothing}
    ${m.servers ? html`${serversView(app)}${toolsView(app)}${permissionsView(app)}${catalogView(app)}` : nothing}
  </div>`;
}

function serversView(app) {
  const m = app.mcp;
  return html`<section class="mcp-section" aria-labelledby="mcp-servers">
    <h2 id="mcp-servers">Servers</h2>
    ${!m.servers.length ? html`<p class="muted small">No servers yet. Install one from the catalog below.</p>` : nothing}
    <ul class="mcp-list" aria-label="Servers">
      ${m.servers.map((s) => {
        const b = serverBadge(s.status);
        const busy = m.busy.has(s.name);
        return html`<li class="mcp-server" data-server=${s.name}>
          <div class="row">
            <b class="mono">${s.name}</b>
            <span class="badge st-${b.state}" data-status=${s.status}><span class="dot" aria-hidden="true">${b.icon}</span>${b.label}</span>
            <span class="muted small">${s.transport} · ${s.tool_count} tool${s.tool_count === 1 ? '' : 's'} · ${approvalWords(s.approval)} · ${s.agents?.length ? `Agents: ${s.agents.join(', ')}` : 'every Agent'}</span>
            <span class="grow"></span>
            <button ?disabled=${busy} @click=${() => m.reconnect(s)}>${busy ? 'Reconnecting…' : 'Reconnect'}</button>
            <button class="danger" ?disabled=${busy} @click=${() => m.remove(s)}>Remove…</button>
          </div>
          ${s.error ? html`<pre class="output error-text mcp-error">${s.error}</pre>` : nothing}
        </li>`;
      })}
    </ul>
  </section>`;
}

function toolsView(app) {
  const m = app.mcp;
  return html`<section class="mcp-section" aria-labelledby="mcp-tools">
    <h2 id="mcp-tools">Tools <span class="muted small">(${m.tools.length})</span></h2>
    ${!m.tools.length ? html`<p class="muted small">No tools: no server is connected.</p>` : nothing}
    <ul class="mcp-list" aria-label="Tools">
      ${m.tools.map((t) => html`<li class="mcp-tool"><code>${t.server} › ${t.tool}</code>
        <span class="muted small">${t.name}</span>${t.description ? html` — ${t.description}` : nothing}</li>`)}
    </ul>
  </section>`;
}

function permissionsView(app) {
  const m = app.mcp;
  return html`<section class="mcp-section" aria-labelledby="mcp-perms">
    <h2 id="mcp-perms">Saved decisions</h2>
    ${!m.permissions.length ? html`<p class="muted small">None: every MCP call asks, or follows its server's approval setting.</p>` : nothing}
    <ul class="mcp-list" aria-label="Saved decisions">
      ${m.permissions.map((p) => html`<li class="mcp-perm row">
        <span class="badge st-${p.decision === 'allow' ? 'ready' : 'failed'}"><span class="dot" aria-hidden="true">${p.decision === 'allow' ? '✓' : '✕'}</span>${p.decision}</span>
        <span>${permissionWords(p)}</span>
        <span class="muted small">${scopeLabel(p.scope)} · ${new Date(p.decided_at).toLocaleString()}</span>
        <span class="grow"></span>
        <button class="danger" aria-label="Revoke: ${permissionWords(p)}" @click=${() => m.revoke(p)}>Revoke…</button>
      </li>`)}
    </ul>
  </section>`;
}

function catalogView(app) {
  const m = app.mcp;
  return html`<section class="mcp-section" aria-labelledby="mcp-catalog">
    <h2 id="mcp-catalog">Catalog</h2>
    <p class="muted small">Installing connects the server in the live registry only: the configuration file is not
      changed, and Agents already running keep their tools.</p>
    <ul class="mcp-list" aria-label="Catalog">
      ${m.catalog.map((e) => entryView(app, e))}
    </ul>
  </section>`;
}

function entryView(app, e) {
  const m = app.mcp;
  const f = m.form(e.slug);
  const cmd = e.transport === 'stdio' ? [e.command, ...(e.args || [])].join(' ') : e.url;
  return html`<li class="mcp-entry" data-slug=${e.slug}>
    <details ?open=${f.open} @toggle=${(ev) => { f.open = ev.target.open; }}>
      <summary><b>${e.name}</b> <span class="muted small">${e.transport}</span> — ${e.description}</summary>
      <form class="mcp-install" aria-label="Install ${e.name}" @submit=${(ev) => { ev.preventDefault(); m.install(e); }}>
        <p class="small">Runs <code>${cmd}</code></p>
        ${(e.values || []).map((v) => html`<label>
          <span>${v.key}${v.required ? html` <span class="required" title="required">(required)</span>` : nothing}</span>
          <input type=${v.secret ? 'password' : 'text'} name=${v.key} ?required=${v.required}
            autocomplete=${v.secret ? 'new-password' : 'off'} spellcheck="false"
            .value=${live(f.values[v.key] || '')} @input=${(ev) => { f.values[v.key] = ev.target.value; }}>
          <span class="muted small">${v.description}${v.secret ? ' Secret: hidden as you type.' : ''}</span>
        </label>`)}
        <label><span>Server name <span class="muted small">(optional; default ${e.slug})</span></span>
          <input name="name" .value=${live(f.name)} @input=${(ev) => { f.name = ev.target.value; }} spellcheck="false"></label>
        ${f.error ? html`<p class="error-text" role="alert">⚠ ${f.error}</p>` : nothing}
        <div class="row"><button type="submit" class="primary" ?disabled=${f.busy}>${f.busy ? 'Installing…' : `Install ${e.name}`}</button></div>
      </form>
    </details>
  </li>`;
}
