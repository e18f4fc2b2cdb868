// Preview: an app running in the Session's sandbox, framed from its own
// virtual origin http://<session>-p<port>.localhost:<daemon port>/ (each
// Session and port its own cookie and storage origin), and the element
// picker. The picker talks to the bridge the daemon injects into the page
// (runtime/preview/picker.js) by postMessage only, and this side accepts a
// message only from that iframe's window and the Preview origin.
//
// Framed here, the app is a cross-site frame (each *.localhost host is a
// site of its own), so the browser treats its cookies as third-party ones:
// Chromium keeps those only when partitioned (SameSite=None; Secure;
// Partitioned). "Open in a new tab" shows the app first-party.

import { html, nothing, live, ref, repeat } from '/vendor/lit.js';
import { previewRef } from './refs.js';
import { newID, persisted } from './util.js';
import { api, sessionPath } from './api.js';
import { listeningPorts } from './portrules.js';

// Each Session's last opened port, across reloads; never another Session's.
const portsPref = persisted('preview-ports', {});

const PROTOCOL = 'lathe-picker';
const VERSION = 1;

/** previewOrigin is the Preview origin of a Session's port, on this page's daemon. */
export function previewOrigin(session, port, loc = location) {
  return `http://${session.toLowerCase()}-p${port}.localhost${loc.port ? `:${loc.port}` : ''}`;
}

/** validPort reports whether p is a TCP port number 1–65535. */
export function validPort(p) {
  return Number.isInteger(p) && p >= 1 && p <= 65535;
}

export class Preview {
  constructor(app) {
    this.app = app;
    this.session = null;
    this.port = null; // the framed port
    this.typed = ''; // the port box
    this.frame = null; // the iframe element
    this.bridge = null; // {url, title} from the bridge's last "ready"
    this.picking = null; // the request_id of a pick in progress
    this.nonce = 0; // bumps on reload, to re-create the iframe
    this.listening = null; // the ports listening in the sandbox (GET preview/ports), sorted
    this.portsError = '';
    this.portsLoading = false;
    this.gen = 0; // bumps on every Session change, to drop stale answers
    this.frameRef = (el) => { this.frame = el || null; };
    addEventListener('message', (ev) => this.message(ev));
  }

  /** show binds the pane to a Session, framing the port it last opened there, else its first exposed port. */
  show(s) {
    if (s.id !== this.session) {
      this.session = s.id;
      const kept = portsPref.get()[s.id];
      this.port = validPort(kept) ? kept : s.exposed_ports?.[0] ?? null;
      this.bridge = null;
      this.picking = null;
      this.listening = null;
      this.portsError = '';
      this.portsLoading = false;
      this.gen++;
    }
    if (!this.listening && !this.portsLoading && !this.portsError && this.app.runtimeState(s.id).usable) this.loadPorts();
  }

  /** loadPorts reads the ports listening in the Session's sandbox, to offer them. */
  async loadPorts() {
    const id = this.session;
    const gen = this.gen;
    this.portsLoading = true;
    this.app.update();
    try {
      const answer = await api('GET', sessionPath(id, '/preview/ports'));
      if (gen !== this.gen) return;
      this.listening = listeningPorts(answer);
      this.portsError = '';
    } catch (err) {
      if (gen !== this.gen) return;
      this.listening = null;
      this.portsError = err.message;
    } finally {
      if (gen === this.gen) this.portsLoading = false;
    }
    this.app.update();
  }

  origin() {
    return this.port ? previewOrigin(this.session, this.port) : '';
  }

  open(port) {
    if (!validPort(port)) {
      this.app.toast('A port is a whole number from 1 to 65535.', 'error');
      return;
    }
    this.port = port;
    this.bridge = null;
    this.picking = null;
    // Remembered for this Session only (the 50 most recent Sessions).
    const kept = Object.entries(portsPref.get()).filter(([id]) => id !== this.session).slice(-49);
    portsPref.set(Object.fromEntries([...kept, [this.session, port]]));
    this.app.update();
  }

  reload() {
    this.bridge = null;
    this.picking = null;
    this.nonce++;
    this.app.update();
  }

  post(msg) {
    this.frame?.contentWindow?.postMessage({ protocol: PROTOCOL, version: VERSION, ...msg }, this.origin());
  }

  /** pick asks the bridge for pick mode; a second press leaves it. */
  pick() {
    if (this.picking) {
      this.post({ type: 'stop' });
      this.picking = null;
    } else {
      this.picking = newID();
      this.post({ type: 'start', request_id: this.picking });
    }
    this.app.update();
  }

  /** message takes the bridge's messages: from the framed window and the Preview origin only. */
  message(ev) {
    if (!this.frame || ev.source !== this.frame.contentWindow || ev.origin !== this.origin()) return;
    const d = ev.data;
    if (!d || typeof d !== 'object' || d.protocol !== PROTOCOL || d.version !== VERSION) return;
    switch (d.type) {
      case 'ready': // a page (re)loaded: it is not in pick mode
        this.bridge = { url: String(d.url || ''), title: String(d.title || '') };
        this.picking = null;
        break;
      case 'picked':
        if (!this.picking || d.request_id !== this.picking || !d.reference || typeof d.reference !== 'object') return;
        this.picking = null;
        this.app.conversation.addReference(this.session, previewRef(d.reference, this.port));
        break;
      case 'cancelled':
        if (d.request_id === this.picking) this.picking = null;
        break;
      default:
        return;
    }
    this.app.update();
  }
}

// ---------------------------------------------------------------------------
// Views

export function previewView(app, s) {
  const pv = app.preview;
  pv.show(s);
  const ports = s.exposed_ports || [];
  const origin = pv.origin();
  const url = origin ? `${origin}/` : '';
  const onLocalhost = location.hostname === 'localhost';
  const submit = (e) => {
    e.preventDefault();
    pv.open(Number(pv.typed));
  };
  return html`<div class="panel preview">
    <div class="panel-head">
      <strong>Preview</strong>
      <div role="group" aria-label="Exposed ports" class="row">
        ${ports.map((p) => html`<button aria-pressed=${p === pv.port ? 'true' : 'false'} @click=${() => pv.open(p)}>:${p}</button>`)}
      </div>
      ${listeningView(app, pv, s)}
      <form class="row" @submit=${submit}>
        <label><span class="sr-only">Port to preview</span><input class="mono port" type="number" min="1" max="65535" placeholder="port"
          .value=${live(pv.typed)} @input=${(e) => { pv.typed = e.target.value; }}></label>
        <button type="submit">Open</button>
      </form>
    </div>
    ${!pv.port
      ? html`<div class="empty small"><p>No port to show. This Session exposes none; type the port an app listens on inside
          the environment (a dev server, <code>python3 -m http.server 8000</code>) and press Open.</p></div>`
      : html`<div class="row pad preview-bar">
          <span class="mono small grow" title=${url}>${pv.bridge?.url || url}</span>
          <button @click=${() => pv.reload()}>Reload</button>
          <a class="button" href=${url} target="_blank" rel="noopener">Open in a new tab</a>
          <button aria-pressed=${pv.picking ? 'true' : 'false'} ?disabled=${!pv.bridge}
            title=${pv.bridge ? 'Click an element in the page to reference it in the next turn (Esc cancels)' : 'The page has not loaded the picker bridge'}
            @click=${() => pv.pick()}>${pv.picking ? 'Picking… (Esc cancels)' : 'Pick an element'}</button>
        </div>
        ${onLocalhost ? nothing : html`<p class="muted small pad">The picker answers a workbench opened at
          <code>http://localhost:${location.port}/</code>; this one is at ${location.host}.</p>`}
        <p class="muted small pad-l">Inside this pane the browser treats the app as another site, so it may drop the
          app's cookies, and a sign-in or a cart may not stick. Open it in a new tab to use it as its own site (or have
          the app set its cookies with <code>SameSite=None; Secure; Partitioned</code>).</p>
        ${frameView(pv, url, s)}`}
  </div>`;
}

/** listeningView offers the ports listening in the sandbox, with a Refresh. */
function listeningView(app, pv, s) {
  const usable = app.runtimeState(s.id).usable;
  const ports = pv.listening || [];
  return html`<div role="group" aria-label="Listening ports" class="row listening">
    <span class="muted small">Listening:</span>
    ${pv.portsError ? html`<span class="error-text small" title=${pv.portsError}>could not read the ports</span>`
      : !pv.listening ? html`<span class="muted small">${usable ? '…' : 'not while the environment is not ready'}</span>`
        : !ports.length ? html`<span class="muted small">none</span>`
          : ports.map((p) => html`<button aria-pressed=${p === pv.port ? 'true' : 'false'} title="Listening in the environment on port ${p}"
              @click=${() => pv.open(p)}>:${p}</button>`)}
    <button class="small" aria-label="Refresh the listening ports" ?disabled=${pv.portsLoading || !usable}
      @click=${() => pv.loadPorts()}>${pv.portsLoading ? 'Reading…' : 'Refresh'}</button>
  </div>`;
}

function frameView(pv, url, s) {
  // A new element per port and reload, so the frame starts afresh.
  const key = `${s.id}:${pv.port}:${pv.nonce}`;
  return html`${repeat([key], (k) => k, () => html`<iframe class="preview-frame" title="Preview of port ${pv.port}" src=${url}
    ${ref(pv.frameRef)} referrerpolicy="no-referrer"></iframe>`)}`;
}
