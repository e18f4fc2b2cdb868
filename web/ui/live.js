// The /ws connection: connect, hand every frame on, reconnect with backoff.
// Each connection starts with `ready` and an authoritative `snapshot`; the
// app replaces its live state from it, so a reconnect never needs to know
// what it missed.

/** Reconnect delays in ms; the last repeats. Each is jittered by ±20%. */
const BACKOFF = [250, 500, 1000, 2000, 4000, 8000, 15000];

/** WebSocket close codes with a meaning here. */
export const CLOSE_LAGGING = 1013; // the hub cut a client that fell behind

export class Live {
  /**
   * @param {object} o
   * @param {string} o.url            the /ws URL
   * @param {(f: object) => void} o.onFrame   every decoded frame
   * @param {(s: object) => void} o.onStatus  {status, attempt, retryAt, reason}
   * @param {typeof WebSocket} [o.WebSocket]
   */
  constructor({ url, onFrame, onStatus, WebSocket: WS = globalThis.WebSocket }) {
    this.url = url;
    this.onFrame = onFrame;
    this.onStatus = onStatus;
    this.WS = WS;
    this.ws = null;
    this.attempt = 0;
    this.timer = 0;
    this.stopped = false;
  }

  start() {
    this.stopped = false;
    this.connect();
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.ws) this.ws.close(1000, 'bye');
    this.ws = null;
    this.status({ status: 'offline', reason: 'stopped' });
  }

  /** send queues a command; it reports whether the socket was open. */
  send(cmd) {
    if (!this.ws || this.ws.readyState !== 1) return false;
    this.ws.send(JSON.stringify(cmd));
    return true;
  }

  /** open reports whether commands can be sent now. */
  get open() {
    return !!this.ws && this.ws.readyState === 1;
  }

  /** retryNow reconnects at once when waiting for a retry. */
  retryNow() {
    if (this.stopped || (this.ws && this.ws.readyState <= 1)) return;
    clearTimeout(this.timer);
    this.connect();
  }

  /** drop closes the connection; it reconnects after the backoff. */
  drop(reason) {
    if (this.ws) this.ws.close(4000, reason);
  }

  /** resetBackoff starts the delays over; call it once a snapshot hydrated. */
  resetBackoff() {
    this.attempt = 0;
  }

  connect() {
    this.status({ status: 'connecting' });
    let ws;
    try {
      ws = new this.WS(this.url);
    } catch (err) {
      this.retry(`cannot open ${this.url}: ${err.message}`, false);
      return;
    }
    this.ws = ws;
    ws.onmessage = (ev) => {
      if (typeof ev.data !== 'string') return;
      // The hub may put several frames in one write, but each WebSocket
      // message is still exactly one JSON frame.
      let f;
      try {
        f = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (f && typeof f.kind === 'string') this.onFrame(f);
    };
    ws.onopen = () => this.status({ status: 'open' });
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null;
      if (this.stopped) return;
      const lagging = ev.code === CLOSE_LAGGING;
      const reason = lagging ? 'fell behind the live feed; rehydrating' : ev.reason || `closed (${ev.code})`;
      this.retry(reason, lagging);
    };
  }

  retry(reason, immediately) {
    const base = BACKOFF[Math.min(this.attempt, BACKOFF.length - 1)];
    const delay = immediately ? 0 : Math.round(base * (0.8 + Math.random() * 0.4));
    this.attempt++;
    this.status({ status: 'offline', reason, retryAt: Date.now() + delay });
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.connect(), delay);
  }

  status(s) {
    this.onStatus({ attempt: this.attempt, retryAt: 0, reason: '', ...s });
  }
}

/** wsURL is the absolute ws(s) URL of a path on this origin. */
export function wsURL(path) {
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${proto}//${location.host}${path}`;
}
