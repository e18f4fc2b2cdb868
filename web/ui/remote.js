// The retained-runtime banner of a remote Session: the engine could not be
// reached when Lathe had to remove its runtime, so the banner names the
// host, the runtime ID and creation token, what to delete by hand, and
// offers the confirmation (confirm-runtime-cleanup with the matching body).
// A refusal shows right there.

import { html, nothing } from '/vendor/lit.js';
import * as S from './store.js';
import { api, ApiError, sessionPath } from './api.js';
import { retainedWords } from './remoterules.js';

// pending holds each Session's confirmation in flight or its last refusal: {busy, error}.
const pending = new Map();

/** confirmCleanup sends the confirmation that rr was deleted by hand and takes the Session it answers. */
async function confirmCleanup(app, s, rr) {
  const p = { busy: true, error: '' };
  pending.set(s.id, p);
  app.update();
  try {
    S.setSession(app.state, await api('POST', sessionPath(s.id, '/environment/confirm-runtime-cleanup'), retainedWords(rr).body));
    pending.delete(s.id);
    app.toast('The retained runtime is cleared.');
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) app.fail(err);
    p.error = err.message;
  } finally {
    p.busy = false;
    app.update();
  }
}

/** retainedView is the banner of the Session's last retained runtime, nothing when it retains none. */
export function retainedView(app, s) {
  const list = s.environment?.retained_runtimes || [];
  if (!s.environment?.retained || !list.length) return nothing;
  const rr = list[list.length - 1];
  const w = retainedWords(rr);
  const p = pending.get(s.id) || {};
  return html`<div class="banner warn retained" role="alert" aria-label="A runtime was left on the engine">
    <p><b>The Docker engine${w.host ? html` at <code>${w.host}</code>` : ''} could not be reached</b>, so this Session’s runtime was
      left there, with its work still in it. Delete it by hand, then confirm.</p>
    <p class="small">Runtime ID <code class="retained-id">${rr.runtime_id || 'none (the engine never answered)'}</code> ·
      creation token <code class="retained-token">${rr.creation_token}</code></p>
    <p class="small">Delete ${w.what.replace(/ [0-9a-f]{64}$/, '')} with:</p>
    ${w.commands.map((c) => html`<pre class="mono small retained-cmd">${c}</pre>`)}
    ${rr.evidence?.error ? html`<details class="small"><summary>Why</summary><p class="muted">${rr.evidence.error}</p></details>` : nothing}
    ${list.length > 1 ? html`<p class="muted small">${list.length - 1} earlier ${list.length === 2 ? 'runtime is' : 'runtimes are'} retained too; each is confirmed in turn.</p>` : nothing}
    <div class="row end"><button class="primary retained-confirm" ?disabled=${p.busy} @click=${() => confirmCleanup(app, s, rr)}>${p.busy ? 'Confirming…' : w.confirm}</button></div>
    ${p.error ? html`<p class="error-text retained-error" role="alert">The confirmation was refused: ${p.error}</p>` : nothing}
  </div>`;
}
