// Chats and the shared file store in the workbench, in a real headless
// Chromium against a real daemon whose Agent talks to the scripted model
// server (fakellm), driven by chats_browser_test.go. No sleeps: every wait
// is Playwright's auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL (no API key: auth is off)
//   LATHE_ARTIFACTS  where a failure's screenshot goes
//
// Flows: a new Chat with the Agent; a file attached by upload; a turn that
// streams its answer (the file's text went to the model: the Go test checks
// the request); fork from the first message, its text back in the composer,
// its own system prompt (an override), edited and sent in the fork while
// the original keeps its messages; Stop ends a streaming turn;
// search; the Files view lists the attached file, refuses to delete it
// because the turn used it, and says why; an upload with tags, retagged,
// then deleted; a .py typed as bytes by the browser stored as
// text/x-python; the layout at 1024, 800 and 390 px. A message typed and
// sent while the Chat's record is read (on entering it, after a /ws
// reconnect, after a turn's end; held back by a route) is kept, shown and
// sent exactly once, and a draft typed then outlives the read; a message
// lost with the connection before its turn started comes back to the box.

import { launch, drive, step, shot, expectText, expectValue, expectLayout } from './harness.mjs';

const base = process.env.LATHE_URL;
const TURN = 30_000;

// Deleting a file a turn used is refused (409): the view says why.
const expected = (r) => r.status() === 409 && r.request().method() === 'DELETE' && new URL(r.url()).pathname.startsWith('/api/files/');
const browsing = await launch({ viewport: { width: 1280, height: 800 }, expected });
const { page } = browsing;

const conv = () => page.locator('.chat-conv');
const items = () => page.getByRole('list', { name: 'Chats', exact: true }).locator('.chat-item');

// sent counts the chat-turn commands this tab sent, by their content.
const sent = new Map();
page.on('websocket', (ws) => ws.on('framesent', ({ payload }) => {
  let cmd;
  try { cmd = JSON.parse(String(payload)); } catch { return; }
  if (cmd.cmd === 'chat-turn') sent.set(cmd.content, (sent.get(cmd.content) || 0) + 1);
}));

// holdReads holds back every read of a Chat's record until the returned
// release is called; reached resolves once the first read is held.
async function holdReads(id) {
  let release, reached;
  const gate = new Promise((r) => { release = r; });
  const hit = new Promise((r) => { reached = r; });
  const url = (u) => u.pathname === `/api/chat/${id}`;
  const handler = async (route) => {
    if (route.request().method() !== 'GET') return route.continue();
    reached();
    await gate;
    await route.continue();
  };
  await page.unrouteAll({ behavior: 'wait' }); // the hold before, released, goes
  await page.route(url, handler);
  return { reached: hit, release }; // once released, reads pass at once
}

async function run() {
  step('a new Chat');
  await page.goto(`${base}/#/chats`);
  await page.locator('[data-conn="live"]').waitFor();
  await page.getByRole('button', { name: '+ Chat' }).click();
  await page.getByLabel('Name').fill('Notes');
  await page.getByRole('button', { name: 'Create' }).click();
  await expectText(page.locator('.chat-title'), 'Notes');

  step('attach a file by upload');
  await page.locator('#chat-attach-input').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('SECRET-42 is the code') });
  await expectText(page.getByRole('list', { name: 'Attachments' }), 'notes.txt');
  await expectText(page.getByRole('list', { name: 'Attachments' }), 'next turn');

  step('a turn streams its answer');
  const input = page.getByLabel('Message to the Chat');
  await input.fill('What do the notes say?');
  await input.press('Enter');
  await expectText(conv().locator('.chat-msg.assistant'), 'The notes say SECRET-42', TURN);
  await expectText(conv().locator('.chat-usage'), 'tokens (in 12 · out 6)', TURN);
  // The record, re-read at the end: the unpinned file was used by the turn.
  await expectText(page.getByRole('list', { name: 'Attachments' }), 'used');
  // The message names the file its turn took.
  await expectText(conv().locator('.chat-msg.user').first().getByRole('list', { name: 'Files of this message' }), 'notes.txt');
  await shot(page, 'chats');

  step('fork from the first message');
  await conv().locator('.chat-msg[data-index="0"]').getByRole('button', { name: 'Fork here' }).click();
  await expectText(page.locator('.chat-title'), 'Notes (fork)');
  if ((await input.inputValue()) !== 'What do the notes say?') throw new Error(`the fork's composer holds ${JSON.stringify(await input.inputValue())}`);
  if ((await conv().locator('.chat-msg').count()) !== 0) throw new Error('the fork at the first message has messages');
  // The fork keeps the attachment; from before the turn that used it, for its next turn again.
  await expectText(page.getByRole('list', { name: 'Attachments' }), 'notes.txt');
  await expectText(page.getByRole('list', { name: 'Attachments' }), 'next turn');
  step('the fork gets its own system prompt');
  await page.getByRole('button', { name: 'Overrides' }).click();
  await page.getByLabel(/^System prompt/).fill('Answer in one word.');
  await page.getByRole('button', { name: 'Save overrides' }).click();
  await expectText(page.locator('.chat-head'), 'own system prompt');
  await input.fill('And in one word?');
  await input.press('Enter');
  await expectText(conv().locator('.chat-msg.assistant'), 'Secret', TURN);
  await expectText(conv().locator('.chat-msg.user').first().getByRole('list', { name: 'Files of this message' }), 'notes.txt');
  await items().nth(1).waitFor();
  if ((await items().count()) !== 2) throw new Error(`${await items().count()} Chats listed, want 2`);

  step('the original keeps its messages');
  await page.getByRole('link', { name: 'Notes', exact: true }).click();
  await expectText(page.locator('.chat-title'), /^Notes$/);
  await conv().locator('.chat-msg').nth(1).waitFor();
  if ((await conv().locator('.chat-msg').count()) !== 2) throw new Error('the original lost or gained messages');
  // (Its search below finds it by its second message.)

  step('Stop ends a streaming turn, keeping what came');
  await input.fill('Keep going');
  await input.press('Enter');
  await expectText(conv().locator('.chat-msg.assistant.streaming'), 'partial answer', TURN);
  await page.getByRole('button', { name: 'Stop' }).click();
  await expectText(conv().locator('.chat-msg.assistant').last(), 'stopped', TURN);
  await expectText(conv().locator('.chat-msg.assistant').last(), 'partial answer');
  await page.getByRole('button', { name: 'Send' }).waitFor();

  step('star and search');
  await items().filter({ hasText: 'fork' }).getByRole('button', { name: /^Star / }).click();
  await expectText(items().first(), 'fork');
  await page.getByPlaceholder('Search names and messages').fill('NOTES SAY');
  await expectText(items().first(), 'Notes');
  await page.waitForFunction(() => document.querySelectorAll('.chat-item').length === 1);
  await page.getByPlaceholder('Search names and messages').fill('');
  await page.waitForFunction(() => document.querySelectorAll('.chat-item').length === 2);

  // A message typed and sent while the fork's record is read (held back
  // by a route) is kept, shown once and sent once, and a draft typed then
  // outlives the read, whatever started it.
  const forkId = await items().filter({ hasText: 'fork' }).getAttribute('data-chat');
  const reads = [
    ['entering the Chat', async () => {
      await items().filter({ hasText: 'fork' }).getByRole('link').click();
      await expectText(page.locator('.chat-title'), 'Notes (fork)'); // the Chat being opened, before its record
    }],
    ['a /ws reconnect', async () => {
      const lost = await page.evaluateHandle(() => { const ws = lathe.live.ws; lathe.live.drop('a test reconnect'); return ws; });
      await page.waitForFunction((old) => lathe.live.ws && lathe.live.ws !== old && lathe.ui.conn.status === 'live', lost); // re-read since
    }],
    ["a turn's end", async () => {
      await input.fill('First of two');
      await input.press('Enter');
      await expectText(conv().locator('.chat-msg.assistant.streaming[data-status="done"]'), 'First reply', TURN);
    }],
  ];
  for (const [i, [what, start]] of reads.entries()) {
    step(`a message typed and sent during the read after ${what} is kept and sent once`);
    const text = `Sent during read ${i + 1}`;
    const held = await holdReads(forkId);
    await start();
    await held.reached;
    await input.fill(text);
    await input.press('Enter');
    await expectText(conv().locator('.chat-msg.user.pending'), text);
    await expectValue(input, '');
    // The turn that ended just before stays in view while its record is held back.
    if (what === "a turn's end") await expectText(conv().locator('.chat-msg.assistant:not(.streaming)'), 'First reply', 1000);
    await input.fill(`Draft ${i + 1}`);
    held.release();
    await expectText(conv().locator('.chat-msg.assistant:not(.streaming)'), `Reply ${i + 1}`, TURN);
    await conv().locator('.chat-msg.streaming').waitFor({ state: 'detached', timeout: TURN }); // the record holds the turn
    await expectValue(input, `Draft ${i + 1}`);
    const copies = await conv().locator('.chat-msg.user').filter({ hasText: text }).count();
    if (copies !== 1) throw new Error(`the message sent during the read shows ${copies} times`);
    if (sent.get(text) !== 1) throw new Error(`the message sent during the read went ${sent.get(text) || 0} times`);
    await input.fill('');
  }
  await expectText(conv().locator('.chat-msg.assistant:not(.streaming)'), 'First reply'); // the first of two, from the record
  if ((await conv().locator('.chat-msg.user').filter({ hasText: 'First of two' }).count()) !== 1) throw new Error('the first of two shows twice');
  await page.unrouteAll({ behavior: 'wait' });

  step('a message lost with the connection before its turn started comes back to the box');
  // The sockets this tab opens from now on pass everything, but the first
  // loses this message on its way and closes.
  let lost = 0;
  await page.routeWebSocket(/\/ws$/, (ws) => {
    const server = ws.connectToServer();
    ws.onMessage((m) => {
      if (!lost && String(m).includes('Lost on the way')) {
        lost++;
        ws.close({ code: 4000, reason: 'a test drop' });
      } else server.send(m);
    });
  });
  await page.reload(); // the app takes the routed WebSocket when it starts
  await page.locator('[data-conn="live"]').waitFor();
  await expectText(conv().locator('.chat-msg.assistant'), 'Reply 3');
  await input.fill('Lost on the way');
  await input.press('Enter');
  await expectValue(input, ''); // sent, as far as this tab knows
  await expectText(page.locator('.toast'), 'back in the box', TURN);
  await expectValue(input, 'Lost on the way');
  if (lost !== 1) throw new Error(`the message was lost ${lost} times`);
  if ((await conv().locator('.chat-msg.user').filter({ hasText: 'Lost on the way' }).count()) !== 0) throw new Error('the lost message shows as sent');
  await input.fill('');

  step('the Shared files view refuses to delete a file a turn used, and says why');
  await page.getByRole('button', { name: 'Shared files', exact: true }).click();
  const file = (name) => page.locator('.store-file').filter({ hasText: name });
  await expectText(file('notes.txt'), 'kept by history');
  // Nothing the server would refuse is offered: Delete is off, and says why.
  if (!(await file('notes.txt').getByRole('button', { name: 'Delete…' }).isDisabled())) throw new Error('Delete is offered for a file history keeps');
  await expectText(file('notes.txt'), 'a turn used this file as context');

  step('upload with tags, retag, delete');
  await page.getByLabel('Tags for the upload').fill('draft, q3');
  await page.locator('#store-upload').setInputFiles({ name: 'plan.md', mimeType: 'text/markdown', buffer: Buffer.from('# plan') });
  await file('plan.md').waitFor();
  const tags = file('plan.md').getByLabel('Tags of plan.md');
  if ((await tags.inputValue()) !== 'draft, q3') throw new Error(`tags ${await tags.inputValue()}`);
  await tags.fill('final');
  await tags.press('Enter');
  await page.getByPlaceholder('Tag').fill('final');
  await page.waitForFunction(() => document.querySelectorAll('.store-file').length === 1);
  await page.getByPlaceholder('Tag').fill('');
  await page.waitForFunction(() => document.querySelectorAll('.store-file').length === 2);
  await shot(page, 'files');
  await file('plan.md').getByRole('button', { name: 'Delete…' }).click();
  const del = page.getByRole('dialog', { name: 'Delete plan.md?' });
  await expectText(del, 'removed from the shared store for good'); // an in-page confirmation that names it
  await del.getByRole('button', { name: 'Delete file' }).click();
  await file('plan.md').waitFor({ state: 'detached' });

  step('an upload the browser types as bytes gets its type from its name and bytes');
  await page.locator('#store-upload').setInputFiles({ name: 'calc.py', mimeType: 'application/octet-stream', buffer: Buffer.from('def add(a, b):\n    return a + b\n') });
  await expectText(file('calc.py'), 'text/x-python');

  step('the layout holds');
  for (const [hash, what] of [['#/chats', 'the Chats'], ['#/files', 'the shared files']]) {
    await page.goto(`${base}/${hash}`);
    await page.locator('[data-conn="live"]').waitFor();
    for (const width of [1024, 800, 390]) {
      await page.setViewportSize({ width, height: 800 });
      await expectLayout(page, `${width} with ${what}`);
    }
    await page.setViewportSize({ width: 1280, height: 800 });
  }
}

await drive(browsing, run);
