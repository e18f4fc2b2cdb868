// The /ws connection's reconnect rules (ui/live.js), with a scripted socket
// and node's mock timers: no real network, no waiting.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Live, CLOSE_LAGGING } from '../ui/live.js';

/** FakeSocket records what the client does and lets the test play the server. */
class FakeSocket {
  static all = [];
  constructor(url) {
    this.url = url;
    this.readyState = 0;
    this.sent = [];
    FakeSocket.all.push(this);
  }
  open() { this.readyState = 1; this.onopen?.(); }
  message(frame) { this.onmessage?.({ data: typeof frame === 'string' ? frame : JSON.stringify(frame) }); }
  close(code = 1000, reason = '') { this.readyState = 3; this.onclose?.({ code, reason }); }
  send(data) { this.sent.push(data); }
}

function rig(t) {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'] });
  FakeSocket.all = [];
  const frames = [];
  const statuses = [];
  const live = new Live({ url: 'ws://x/ws', WebSocket: FakeSocket, onFrame: (f) => frames.push(f), onStatus: (s) => statuses.push(s) });
  return { live, frames, statuses, sock: () => FakeSocket.all.at(-1) };
}

test('frames pass through; malformed ones and non-frames are dropped', (t) => {
  const { live, frames, sock } = rig(t);
  live.start();
  sock().open();
  sock().message({ kind: 'ready' });
  sock().message('not json');
  sock().message({ no: 'kind' });
  sock().message({ kind: 'snapshot', seq: 3 });
  assert.deepEqual(frames.map((f) => f.kind), ['ready', 'snapshot']);
  assert.equal(live.send({ cmd: 'ping' }), true);
  assert.deepEqual(sock().sent, ['{"cmd":"ping"}']);
});

test('a lagging client reconnects at once; other closes back off, growing, until a hydrate resets it', (t) => {
  const { live, statuses, sock } = rig(t);
  live.start();
  sock().open();
  sock().close(CLOSE_LAGGING, 'lagging');
  assert.equal(FakeSocket.all.length, 1);
  t.mock.timers.tick(0);
  assert.equal(FakeSocket.all.length, 2, 'reconnected without a delay');
  assert.match(statuses.findLast((s) => s.status === 'offline').reason, /fell behind/);

  const delays = [];
  for (let i = 0; i < 5; i++) {
    sock().close(1006, '');
    const s = statuses.at(-1);
    delays.push(s.retryAt - Date.now());
    const n = FakeSocket.all.length;
    t.mock.timers.tick(s.retryAt - Date.now() - 1);
    assert.equal(FakeSocket.all.length, n, 'not before its delay');
    t.mock.timers.tick(1);
    assert.equal(FakeSocket.all.length, n + 1, 'right after it');
  }
  for (let i = 1; i < delays.length; i++) assert.ok(delays[i] > delays[i - 1], `delays grow: ${delays}`);

  live.resetBackoff();
  sock().close(1006, '');
  assert.ok(statuses.at(-1).retryAt - Date.now() <= 300, 'back to the first delay');
});

test('no commands while closed; stop ends reconnecting', (t) => {
  const { live, sock } = rig(t);
  live.start();
  assert.equal(live.send({ cmd: 'ping' }), false, 'not open yet');
  sock().open();
  live.stop();
  t.mock.timers.tick(60_000);
  assert.equal(FakeSocket.all.length, 1);
  assert.equal(live.send({ cmd: 'ping' }), false);
});
