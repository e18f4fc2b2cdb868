// The environment review: the exact plan (image, setup command and where it
// came from), consent that binds to that exact text, failure evidence in
// full, rebuild, and a reviewed change of plan.

import { html, nothing, live } from '/vendor/lit.js';
import * as S from './store.js';
import { api, path, sessionPath } from './api.js';
import { badge } from './rail.js';
import { reasonWords, setupOutput } from './envrules.js';

const SOURCES = {
  devcontainer: 'the Workspace’s devcontainer',
  lockfile: 'a lockfile in the Workspace',
  user: 'you (typed when the Session was created or changed)',
};

/** Environment holds the review panel's requests and its plan editor. */
export class Environment {
  constructor(app) {
    this.app = app;
    this.busy = new Map(); // session id → what is running ('approve', 'veto', 'rebuild', 'change')
    this.probes = new Map(); // workspace id → {data} | {error} | {loading}
    this.forms = new Map(); // session id → {image, setup, approve}
  }

  probe(w) {
    if (!w || this.probes.has(w.id)) return this.probes.get(w?.id);
    const entry = { loading: true };
    this.probes.set(w.id, entry);
    api('GET', path('/api/fs/project', { path: w.path }))
      .then((data) => this.probes.set(w.id, { data }))
      .catch((err) => this.probes.set(w.id, { error: err.message }))
      .finally(() => this.app.update());
    return entry;
  }

  form(s) {
    let f = this.forms.get(s.id);
    if (!f) {
      f = { image: s.environment.image, setup: s.environment.setup_command, approve: s.environment.setup_approved };
      this.forms.set(s.id, f);
    }
    return f;
  }

  /**
   * run sends one synchronous lifecycle request; it answers with the Session
   * (failed, with evidence, when the environment did not come up).
   */
  async run(s, what, method, rest, body) {
    const app = this.app;
    this.busy.set(s.id, what);
    app.update();
    try {
      const ss = await api(method, sessionPath(s.id, rest), body);
      S.setSession(app.state, ss);
      this.forms.delete(s.id);
      if (ss.environment.state === 'failed') {
        app.toast(`The environment of “${ss.name}” failed; the evidence is in the review.`, 'error');
        document.querySelector('.env-panel')?.scrollTo(0, 0); // the evidence is at the top
      }
    } catch (err) {
      app.fail(err, 'Environment');
    } finally {
      this.busy.delete(s.id);
      app.syncRuntime();
      app.update();
    }
  }

  /** decide approves or vetoes the exact setup command the record holds. */
  decide(s, approve) {
    const env = s.environment;
    return this.run(s, approve ? 'approve' : 'veto', 'PUT', '/environment', {
      image: env.image, setup_command: env.setup_command, setup_approved: approve, setup_reviewed: true,
    });
  }

  rebuild(s) {
    return this.run(s, 'rebuild', 'POST', '/environment/rebuild');
  }

  change(s) {
    const f = this.form(s);
    const setup = f.setup.trim();
    const body = { setup_command: setup, setup_approved: setup !== '' && f.approve, setup_reviewed: true };
    if (f.image.trim()) body.image = f.image.trim(); // else the daemon's default image
    return this.run(s, 'change', 'PUT', '/environment', body);
  }
}

export function envView(app, s) {
  const envs = app.environment;
  const env = s.environment;
  const w = app.state.workspaces.get(s.workspace_id);
  const probe = envs.probe(w);
  const busy = envs.busy.get(s.id);
  const closed = s.status === 'closed';
  const rt = app.runtimeState(s.id);
  const dc = probe?.data?.devcontainer;
  return html`<div class="panel env-panel">
    <header class="panel-head">
      <h2>Environment</h2>
      ${badge(S.sessionBadge(app.state, s, app.ui.conn.status))}
      <span class="spacer"></span>
      <button class="icon" aria-label="Close the environment review" @click=${() => app.showTool('environment')}>×</button>
    </header>
    ${rt.suspended ? html`<p class="banner" role="status">◌ ${rt.reason} Files and terminals are suspended until it settles.</p>` : nothing}
    ${busy ? html`<p class="banner" role="status">◌ ${busyText(busy)}</p>` : nothing}

    ${env.state === 'awaiting_approval' ? approvalView(app, s, busy) : nothing}
    ${env.state === 'failed' && env.evidence ? evidenceView(env.evidence) : nothing}

    <section aria-labelledby="plan-h">
      <h3 id="plan-h">Plan</h3>
      <dl class="facts">
        <dt>Image</dt>
        <dd><code>${env.image || 'the daemon’s default image'}</code>${dc?.image && dc.image === env.image ? html` <span class="muted small">(from the devcontainer)</span>` : nothing}</dd>
        <dt>Setup command</dt>
        <dd>${env.setup_command ? html`<pre class="command" data-testid="setup-command">${env.setup_command}</pre>` : html`<span class="muted">none</span>`}</dd>
        ${env.setup_command ? html`<dt>Came from</dt><dd>${sourceText(env.setup_source, dc)}</dd>` : nothing}
        ${env.setup_command ? html`<dt>Consent</dt><dd>${consentText(env)}</dd>` : nothing}
        ${env.setup_ran ? html`<dt>Setup</dt><dd>✓ ran in this generation</dd>` : nothing}
        ${env.setup_skipped ? html`<dt>Setup</dt><dd>skipped: ${env.setup_skipped}</dd>` : nothing}
        ${env.reason ? html`<dt>Last prepared</dt><dd class="env-reason" title=${`${env.reason} (generation ${env.generation})`}>${reasonWords(env)}
          <span class="muted small">· preparation ${env.generation}</span></dd>` : nothing}
      </dl>
      ${setupOutputView(env)}
      ${dc ? html`<p class="muted small">Devcontainer: <code>${dc.path}</code>${dc.warnings?.length ? html` — ${dc.warnings.join('; ')}` : nothing}</p>` : nothing}
      ${probe?.error ? html`<p class="muted small">Could not probe the Workspace: ${probe.error}</p>` : nothing}
      <div class="row">
        <button @click=${() => envs.rebuild(s)} ?disabled=${closed || !!busy || env.state === 'awaiting_approval' || rt.suspended}
          title="Remove the runtime and prepare this plan again">Rebuild</button>
      </div>
    </section>
    ${closed ? html`<p class="muted">Reopen the Session to change its environment.</p>` : changeView(app, s, busy, probe)}
  </div>`;
}

/** setupOutputView is the end of the setup command's output, bounded, monospace and collapsible. */
function setupOutputView(env) {
  const out = setupOutput(env);
  if (!out) return nothing;
  return html`<details class="setup-output" open>
    <summary>Setup output${out.cut ? ` (the last ${out.text.length.toLocaleString('en-US')} characters)` : ''}</summary>
    <pre class="output" aria-label="Setup output">${out.text}</pre>
  </details>`;
}

function busyText(what) {
  return {
    approve: 'Approved: preparing the environment and running the setup command…',
    veto: 'Vetoed: preparing the environment without the setup command…',
    rebuild: 'Rebuilding: removing the old runtime and preparing the plan again…',
    change: 'Preparing the new plan…',
  }[what];
}

function sourceText(source, dc) {
  if (source === 'devcontainer' && dc) return html`${SOURCES.devcontainer} (<code>${dc.path}</code>)`;
  return SOURCES[source] || source || 'unknown';
}

function consentText(env) {
  if (env.setup_approved) return '✓ Approved: this exact text runs when the environment is prepared.';
  if (env.setup_reviewed) return '✕ Vetoed by review: the environment prepares without it.';
  return '? Not reviewed yet: nothing runs until you decide.';
}

function approvalView(app, s, busy) {
  const env = s.environment;
  return html`<section class="approval" aria-labelledby="approval-h">
    <h3 id="approval-h">Approve the setup command?</h3>
    <p>This Session waits for your decision before its environment is prepared. The command came from
      ${SOURCES[env.setup_source] || 'an unknown source'} and runs inside the Session’s sandbox:</p>
    <pre class="command" data-testid="approval-command">${env.setup_command}</pre>
    <p class="muted small">Your approval binds to exactly this text. If the command changes, it needs a new review.</p>
    <div class="row">
      <button class="primary" ?disabled=${!!busy} @click=${() => app.environment.decide(s, true)}>Approve and prepare</button>
      <button ?disabled=${!!busy} @click=${() => app.environment.decide(s, false)}>Veto: prepare without it</button>
    </div>
  </section>`;
}

function evidenceView(ev) {
  return html`<section class="evidence" role="alert" aria-labelledby="evidence-h">
    <h3 id="evidence-h">✕ The environment failed</h3>
    <p class="error-text">${ev.error}</p>
    ${ev.exit_code !== undefined && ev.exit_code !== null ? html`<p>Exit code <code>${ev.exit_code}</code></p>` : nothing}
    ${ev.output_tail ? html`<details open><summary>Output (last ${ev.output_tail.length.toLocaleString('en-US')} characters)</summary><pre class="output">${ev.output_tail}</pre></details>` : nothing}
    ${ev.fix ? html`<p><b>Fix:</b> ${ev.fix}</p>` : nothing}
  </section>`;
}

function changeView(app, s, busy, probe) {
  const envs = app.environment;
  const f = envs.form(s);
  const dc = probe?.data?.devcontainer;
  const detected = probe?.data?.detected_setup || [];
  const suggestions = [
    ...(dc?.post_create_command ? [{ command: dc.post_create_command, label: `devcontainer postCreateCommand` }] : []),
    ...detected.map((d) => ({ command: d.command, label: `from ${d.file}` })),
  ];
  const set = (k) => (e) => { f[k] = e.target.type === 'checkbox' ? e.target.checked : e.target.value; app.update(); };
  return html`<details class="change">
    <summary>Change the plan…</summary>
    <form @submit=${(e) => { e.preventDefault(); envs.change(s); }}>
      <label>Image <input name="image" .value=${live(f.image)} @input=${set('image')} placeholder="the daemon’s default image"></label>
      <label>Setup command <textarea name="setup" rows="3" .value=${live(f.setup)} @input=${set('setup')} placeholder="none"></textarea></label>
      ${suggestions.length
        ? html`<p class="small">Suggestions: ${suggestions.map((x) => html`<button type="button" class="link" @click=${() => { f.setup = x.command; app.update(); }}><code>${x.command}</code></button> <span class="muted">(${x.label})</span> `)}</p>`
        : nothing}
      <label class="check"><input type="checkbox" .checked=${live(f.approve)} @change=${set('approve')} ?disabled=${!f.setup.trim()}>
        Run this exact setup command (leave unchecked to veto it)</label>
      <p class="muted small">Applying is a reviewed decision: the runtime is replaced and this plan is prepared now.</p>
      <button type="submit" ?disabled=${!!busy}>Apply and prepare</button>
    </form>
  </details>`;
}
