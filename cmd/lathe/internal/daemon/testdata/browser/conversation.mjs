// The conversation surface in a real headless Chromium against a real daemon
// whose Agent talks to the scripted model server, driven by
// conversation_test.go. No sleeps: every wait is Playwright's auto-waiting or
// an expectation with a timeout.
//
// Environment:
//   LATHE_URL             the daemon's base URL (no API key: auth is off)
//   LATHE_SESSION         a Ready single-Agent Session in LATHE_WORKSPACE
//   LATHE_WORKSPACE       the Session's Workspace folder
//   LATHE_OVERRIDE_MODEL  the one-turn model whose turn the provider refuses
//   LATHE_ARTIFACTS       where a failure's screenshot goes
//
// Prints "SIGNAL release" when the held turn may go on, "METRIC <name>
// <value> <unit>" lines, and PASS; exits 1 on the first failure.

import { chromium } from 'playwright-core';
import fs from 'node:fs/promises';
import path from 'node:path';
import { drive, shot, expectLayout, paneBox } from './harness.mjs';

const base = process.env.LATHE_URL;
const sessionId = process.env.LATHE_SESSION;
const wsDir = process.env.LATHE_WORKSPACE;
const overrideModel = process.env.LATHE_OVERRIDE_MODEL;
const artifacts = process.env.LATHE_ARTIFACTS || '.';
const chromiumPath = process.env.LATHE_CHROMIUM || '/usr/bin/chromium';
const TURN = 30_000; // a turn's tools run in the sandbox on a loaded 2-core machine

const step = (name) => console.log(`STEP ${name}`);
const metric = (name, value, unit) => console.log(`METRIC ${name} ${value.toFixed(1)} ${unit}`);

const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ['--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-gpu', '--disable-quic'],
});
const context = await browser.newContext({
  viewport: { width: 1280, height: 800 }, colorScheme: 'light', reducedMotion: 'reduce', acceptDownloads: true,
  permissions: ['clipboard-read', 'clipboard-write'],
});
const page = await context.newPage();
const problems = [];
page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
page.on('console', (m) => {
  if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console error: ${m.text()}`);
});
// The refusals the flows cause on purpose: a rewind during a live turn, and the
// Files tree's Git status in a folder that is not a repository.
const expected = (r) => (r.status() === 409 && r.request().method() === 'POST' && new URL(r.url()).pathname.endsWith('/rewind')) ||
  (r.status() === 409 && r.request().method() === 'GET' && new URL(r.url()).pathname.endsWith('/git/status')); // the Files tree asks once: not a repository
page.on('response', (r) => {
  if (r.status() >= 400 && !expected(r)) problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`);
});

/** expectText waits until one of locator's elements contains want. */
async function expectText(locator, want, timeout = 15_000) {
  await locator.filter({ hasText: want }).first().waitFor({ timeout });
}

/** expectExact waits until fn (run in the page) returns want. */
async function expectExact(what, fn, arg, want, timeout = 15_000) {
  try {
    await page.waitForFunction(([a, w]) => lathe && window.__convProbe(a) === w, [arg, want], { timeout });
  } catch (err) {
    const got = await page.evaluate((a) => window.__convProbe?.(a), arg).catch(() => '?');
    throw new Error(`${what}: ${JSON.stringify(got)}, want ${JSON.stringify(want)} (${err.message.split('\n')[0]})`);
  }
}

/** probe installs window.__convProbe(n): the answer text of turn n (from 1) as shown. */
async function probe() {
  await page.evaluate(() => {
    window.__convProbe = (n) => {
      const li = document.querySelectorAll('.transcript .turn')[n - 1];
      return li ? [...li.querySelectorAll('.answer')].map((e) => e.textContent).join('') : null;
    };
  });
}

const transcript = () => page.getByRole('region', { name: 'Conversation' });
const turn = (n) => transcript().locator('.turn').nth(n - 1);
const status = (n) => turn(n).locator('.turn-status');

/** send types a message into the composer and sends it with Enter. */
async function send(text) {
  const composer = page.getByLabel('Message to the Agent');
  await composer.click();
  await page.keyboard.type(text);
  await page.keyboard.press('Enter');
}

async function open() {
  await page.goto(`${base}/#/sessions/${encodeURIComponent(sessionId)}`);
  await page.locator('[data-conn="live"]').waitFor();
  await page.getByLabel('Message to the Agent').waitFor();
  await probe();
  // Record what the page copies, as well as copying it.
  await page.evaluate(() => {
    const write = navigator.clipboard.writeText.bind(navigator.clipboard);
    navigator.clipboard.writeText = (t) => { window.__copied = t; return write(t); };
  });
}

/** copied waits until the page has copied want. */
async function copied(want) {
  await page.waitForFunction((w) => window.__copied === w, want).catch(async () => {
    throw new Error(`copied ${JSON.stringify(await page.evaluate(() => window.__copied))}, want ${JSON.stringify(want)}`);
  });
}

async function run() {
  step('open the Session: an empty conversation');
  await open();
  await transcript().getByText('No turns yet').waitFor();

  step('an attachment kept for every turn, and a context reference from the editor selection');
  await page.locator('#attach-input').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('remember this') });
  const attachments = page.getByRole('list', { name: 'Attachments' });
  await expectText(attachments, 'notes.txt');
  await attachments.getByRole('button', { name: 'next turn' }).click();
  await expectText(attachments, 'every turn');
  await page.getByRole('button', { name: 'Files', exact: true }).click();
  const files = page.getByRole('complementary', { name: 'Files' });
  await files.getByRole('button', { name: 'app.py' }).click();
  const editor = files.locator('.cm-content');
  await expectText(editor, 'print("hello")');
  await editor.click();
  await page.keyboard.press('Control+a');
  await files.getByRole('button', { name: /^Reference lines 1–/ }).click();
  await expectText(page.getByRole('list', { name: 'References' }), 'app.py:1');

  step('Enter sends; tokens stream; reasoning is collapsible; tool cards have their results, a failure shown open');
  const t0 = Date.now();
  await send('write the greeting');
  await expectText(turn(1).locator('.user-turn .text'), 'write the greeting');
  await expectText(turn(1).locator('.user-turn .chip'), 'app.py:1');
  await expectText(turn(1).locator('.turn-attachments'), '1 attachment');
  await expectText(turn(1).locator('.answer'), 'Writing the file.', TURN);
  metric('first_tokens_shown', Date.now() - t0, 'ms');
  const card = turn(1).locator('.tool-card').filter({ hasText: 'write_file' });
  await expectText(card.locator('.tool-state'), '✓ done', TURN);
  await expectText(status(1), 'Done', TURN);
  await expectText(turn(1).locator('.answer').first(), 'Writing the file.');
  if ((await turn(1).locator('.answer').count()) !== 2) throw new Error('turn 1 should have its two answer parts, once each');
  const reasoning = turn(1).locator('details.reasoning');
  if (await reasoning.evaluate((d) => d.open)) throw new Error('reasoning starts expanded');
  await reasoning.locator('summary').click();
  await expectText(reasoning.locator('pre'), 'plan: write the greeting file');
  await expectText(card.locator('.tool-title'), 'write_file notes/hello.txt'); // what it did, collapsed
  await card.locator('summary').first().click();
  await expectText(card.locator('pre.diff .add'), '+ hi from the agent');
  await card.getByRole('button', { name: 'Open notes/hello.txt' }).waitFor();
  if (await card.locator('.tool-args').isVisible()) throw new Error('raw JSON shows without its toggle');
  await card.locator('.tool-raw > summary').click();
  await expectText(card.locator('.tool-args'), '"path": "notes/hello.txt"');
  await card.locator('.tool-result').waitFor();
  const failed = turn(1).locator('.tool-card').filter({ hasText: 'read_file' });
  await expectText(failed.locator('.tool-state'), '✕ failed'); // in words, not by colour alone
  if (!(await failed.evaluate((d) => d.open))) throw new Error('a failed tool call starts collapsed');
  await expectText(failed.locator('.tool-output'), 'no such file');
  const edit = turn(1).locator('.tool-card').filter({ hasText: 'edit_file app.py' });
  await expectText(edit.locator('.tool-state'), '✓ done');
  await edit.locator('summary').first().click();
  await expectText(edit.locator('pre.diff .del'), '- hello');
  await expectText(edit.locator('pre.diff .add'), '+ hello, world');
  const sh = turn(1).locator('.tool-card.tk-shell');
  await expectText(sh.locator('.tool-title'), 'run echo out-$((6*7)); exit 1 (exit 1)');
  await expectText(sh.locator('.tool-state'), '✕ failed');
  await expectText(sh.locator('.term-cmd'), 'echo out-$((6*7)); exit 1');
  await expectText(sh.locator('.term-out'), 'out-42');
  await expectText(sh.locator('.term-exit'), 'exit 1');

  step('the answer is Markdown, and model output brings no HTML, script or unsafe link');
  const answer = turn(1).locator('.answer').nth(1);
  await expectText(answer.locator('h2'), 'Summary');
  await expectText(answer.locator('li strong'), 'notes/hello.txt');
  await expectText(answer.locator('table td'), 'written');
  await expectText(answer.locator('.code-block .code-lang'), 'python');
  await answer.locator('.code-block code .hljs-built_in').waitFor(); // highlighted
  const docs = answer.getByRole('link', { name: 'docs' });
  if ((await docs.getAttribute('href')) !== 'https://example.com/docs' || (await docs.getAttribute('target')) !== '_blank' ||
    (await docs.getAttribute('rel')) !== 'noopener noreferrer') {
    throw new Error(`the docs link is ${await docs.evaluate((a) => a.outerHTML)}`);
  }
  const unsafe = await answer.evaluate((el) => ({
    html: el.innerHTML,
    bad: el.querySelectorAll('script, img, iframe, style, [onerror], a[href^="javascript"], a:not([href^="http"]):not([href^="mailto"])[href]').length,
    xss: window.__xss,
  }));
  if (unsafe.bad || unsafe.xss !== undefined) throw new Error(`unsafe Markdown output: ${unsafe.html}`);
  await expectText(answer, '<script>window.__xss=1</script>'); // shown as text
  await answer.getByRole('button', { name: 'Copy the python code' }).click();
  await copied('print("hello, world")\n');
  await turn(1).getByRole('button', { name: "Copy the Agent's answer" }).click();
  await copied(`Writing the file.${await page.evaluate(() => lathe.state.turns.get(lathe.ui.route.session).turns[0].parts.filter((p) => p.kind === 'text')[1].text)}`);
  await turn(1).getByRole('button', { name: 'Copy your message' }).click();
  await copied('write the greeting');
  // The README's screen: the dock folded, the tool cards in view.
  await card.locator('.tool-raw > summary').click(); // the raw call folded again
  await page.evaluate(() => lathe.toggleDock());
  await page.locator('#dock-panel').waitFor({ state: 'hidden' });
  await card.evaluate((el) => el.scrollIntoView({ block: 'start' }));
  await shot(page, 'session-turn');
  await page.evaluate(() => lathe.toggleDock());

  step('usage: tokens and the priced cost, per turn and per Session');
  await expectText(turn(1).locator('.turn-tokens'), '$'); // the durable record adds the cost
  await expectText(turn(1).locator('.turn-tokens'), '178 tokens');
  await expectText(page.locator('.session-usage'), '178 tokens');

  step('the turn record keeps what was typed apart from the input sent, with its references');
  const rec = await page.evaluate(async (id) => (await (await fetch(`/api/sessions/${id}/turns`)).json()).turns[0], sessionId);
  if (rec.display_input !== 'write the greeting' || !rec.input.includes('Context from app.py') ||
    rec.context_references?.length !== 1 || rec.reference_ids?.length !== 1) {
    throw new Error(`turn record: ${JSON.stringify({ ...rec, steps: undefined, tool_calls: undefined })}`);
  }
  await expectText(attachments, 'every turn'); // a session-scoped attachment stays for the next turn

  step('the file the Agent wrote is in the tree and the editor');
  await files.getByRole('button', { name: 'notes/' }).click();
  await files.getByRole('button', { name: 'hello.txt' }).click();
  await expectText(files.locator('.cm-content'), 'hi from the agent');
  await page.getByRole('button', { name: 'Files', exact: true }).click(); // close it again
  await turn(1).locator('.tool-card').filter({ hasText: 'write_file' }).getByRole('button', { name: 'Open notes/hello.txt' }).click();
  await page.waitForURL(/\/files\/notes\/hello\.txt$/);
  await expectText(files.locator('.cm-content'), 'hi from the agent');
  await page.getByRole('button', { name: 'Files', exact: true }).click(); // close it again

  step('a turn held mid-stream survives a reload: the text so far once, then the rest');
  await send('hold on');
  await expectExact('held turn before the reload', null, 2, 'first half,', TURN); // Markdown: a paragraph ends trimmed
  await page.reload();
  await open();
  await expectText(turn(2).locator('.user-turn .text'), 'hold on');
  await expectExact('held turn after the reload', null, 2, 'first half,');
  await expectText(status(2), 'Working');
  // The same `session` command again, as a resend after a lost acceptance
  // would carry it: the daemon reattaches this connection, nothing doubles.
  const held = await page.evaluate(() => {
    const t = lathe.state.turns.get(lathe.ui.route.session).turns.at(-1);
    const onFrame = lathe.live.onFrame;
    window.__accepted = 0;
    lathe.live.onFrame = (f) => {
      if (f.kind === 'session-accepted' && f.turn_id === t.turn_id) window.__accepted++;
      onFrame(f);
    };
    lathe.live.send({ cmd: 'session', id: lathe.ui.route.session, turn_id: t.turn_id, idempotency_key: t.turn_id, input: 'hold on' });
    return t.turn_id;
  });
  await page.waitForFunction(() => window.__accepted === 1);
  await expectExact('held turn after a repeated session command', null, 2, 'first half,');
  // A rewind while a turn runs is refused, and the dialog says why.
  await turn(1).getByRole('button', { name: 'Rewind to here…' }).click();
  const refused = page.getByRole('dialog', { name: 'Rewind the conversation?' });
  await refused.getByRole('button', { name: 'Rewind' }).click();
  await expectText(refused.getByRole('alert'), /turn/);
  await refused.getByRole('button', { name: 'Cancel' }).click();
  await refused.waitFor({ state: 'hidden' });
  console.log('SIGNAL release');
  await expectText(status(2), 'Done', TURN);
  await expectExact('held turn after it ended', null, 2, 'first half, second half');
  if ((await transcript().locator('.turn').count()) !== 2) throw new Error('the reload or the reattach doubled a turn');
  if ((await turn(2).getAttribute('data-turn')) !== held) throw new Error('the held turn changed its identity');

  step('a turn sent offline goes out after the reconnect; Esc stops it; its usage is a subtotal');
  await page.evaluate(() => lathe.live.stop());
  await page.locator('[data-conn="offline"]').waitFor();
  await expectText(page.locator('.session-head .env-badge'), 'unknown (offline)'); // not a green Ready
  await expectText(page.locator('[data-conn="offline"]'), 'Reconnecting…');
  if (/\(\d{4}\)|\b10\d\d\b/.test(await page.locator('[data-conn="offline"]').textContent())) throw new Error('the rail shows a bare close code');
  await send('think about it');
  await expectText(status(3), 'Sending');
  await page.evaluate(() => lathe.live.start());
  await expectExact('turn to stop', null, 3, 'thinking about it', TURN);
  await page.keyboard.press('Escape');
  await expectText(status(3), 'Stopped', TURN);
  await expectText(page.locator('.session-head .env-badge'), 'Ready');
  // Stopped before any usage came back: no "at least 0 tokens" line, from the frame or the record.
  await page.waitForFunction(() => lathe.state.turns.get(lathe.ui.route.session).turns[2].tokens !== null);
  if (await turn(3).locator('.turn-tokens').count()) throw new Error(`a Stop before any usage shows ${await turn(3).locator('.turn-tokens').textContent()}`);
  if (/at least 0/.test(await page.locator('.session-usage').textContent())) throw new Error('the header counts "at least 0"');

  step('a one-turn model override; the provider refuses it and the turn shows why');
  await page.getByLabel('Model for the next turn').selectOption(overrideModel);
  await send('try the other model');
  await expectText(status(4), 'Failed', TURN);
  await expectText(turn(4).getByRole('alert'), 'Error:');
  await expectText(turn(4).locator('.user-turn'), `model ${overrideModel}`);
  if ((await page.getByLabel('Model for the next turn').inputValue()) !== '') throw new Error('the model override outlived its turn');

  step('retry a failed turn: the same message again, as a new turn (the script has none left, so it fails too)');
  await page.getByLabel('Message to the Agent').fill('draft kept');
  await turn(4).getByRole('button', { name: 'Retry' }).click();
  await expectText(turn(5).locator('.user-turn .text'), 'try the other model');
  await expectText(turn(5).locator('.user-turn'), `model ${overrideModel}`);
  await expectText(status(5), 'Failed', TURN);
  if ((await page.getByLabel('Message to the Agent').inputValue()) !== 'draft kept') throw new Error('Retry lost the composer draft');
  await page.getByLabel('Message to the Agent').fill('');
  await page.screenshot({ path: path.join(artifacts, 'conversation.png') });

  step('export to Markdown and JSON downloads the conversation');
  const sessionName = await page.evaluate(() => lathe.state.sessions.get(lathe.ui.route.session).name);
  const exported = async (name) => {
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('group', { name: 'Export the conversation' }).getByRole('link', { name }).click(),
    ]);
    const file = download.suggestedFilename();
    const ext = name === 'JSON' ? 'json' : 'md';
    if (!new RegExp(`-\\d{4}-\\d{2}-\\d{2}\\.${ext}$`).test(file) || file.includes(sessionId) || !file.startsWith(sessionName.replace(/[\\/:*?"<>|]+/g, '-').slice(0, 20))) {
      throw new Error(`the ${name} export is named ${JSON.stringify(file)}, not by the Session's name (${JSON.stringify(sessionName)}) and date`);
    }
    return fs.readFile(await download.path(), 'utf8');
  };
  const json = await exported('JSON');
  if (!json.includes('first half, second half')) throw new Error(`the JSON export lacks the held turn: ${json.slice(0, 2000)}`);
  JSON.parse(json);
  const md = await exported('Markdown');
  for (const want of ['write the greeting', 'Done: wrote notes/hello.txt.', 'first half, second half']) {
    if (!md.includes(want)) throw new Error(`the Markdown export lacks ${JSON.stringify(want)}:\n${md.slice(0, 2000)}`);
  }

  step('search (from the palette) finds a turn and jumps to it');
  await page.keyboard.press('Control+k');
  const palette = page.getByRole('dialog', { name: 'Command palette' });
  await palette.getByRole('combobox').fill('second half');
  await palette.getByRole('option', { name: /Run task: second half/ }).waitFor(); // offered, but only when chosen
  const tasks = await page.evaluate(() => lathe.dock.tasks.length);
  await palette.getByRole('combobox').press('Enter'); // plain text searches
  await page.waitForFunction(() => document.getElementById('turn-search')?.value === 'second half');
  if ((await page.evaluate(() => lathe.dock.tasks.length)) !== tasks) throw new Error('Enter in the palette ran a task');
  const hits = page.getByRole('list', { name: 'Turns found' });
  await hits.getByRole('button').first().click();
  await page.locator('.turn.found[data-turn]').waitFor();
  await hits.waitFor({ state: 'detached' }); // chosen: the results close
  if ((await page.locator('.turn.found .answer').first().textContent()) !== 'first half, second half') {
    throw new Error('the search jumped to the wrong turn');
  }
  await page.getByRole('searchbox', { name: 'Search turns' }).fill('second');
  await hits.waitFor();
  await page.goto(`${base}/#/`); // the user moves on: the results stay behind
  await page.goto(`${base}/#/sessions/${encodeURIComponent(sessionId)}`);
  await page.getByLabel('Message to the Agent').waitFor();
  if (await hits.count()) throw new Error('the turn search results followed the user');

  step('layout at every width: nothing overflows, no panes overlap');
  await page.getByRole('button', { name: 'Files', exact: true }).click();
  for (const width of [1280, 1024, 800]) {
    await page.setViewportSize({ width, height: 800 });
    await expectLayout(page, `${width} px`);
  }
  await page.setViewportSize({ width: 1024, height: 800 });
  const main = await paneBox(page, '.shell > .main');
  if (main.width < 480) throw new Error(`at 1024 px the conversation is ${main.width} px wide`);
  await page.locator('.rail-head').getByRole('button', { name: /rail/ }).click(); // the names, in a flyout
  const named = page.getByRole('navigation', { name: 'Workspaces and Sessions' }).locator('.session-name').first();
  await named.waitFor();
  await shot(page, 'rail-flyout');
  await page.locator('.rail-scrim').click();
  await named.waitFor({ state: 'hidden' });
  await page.setViewportSize({ width: 390, height: 844 });
  await expectLayout(page, '390 px');
  const switcher = page.getByRole('navigation', { name: 'Panes' });
  for (const [pane, shows] of [['Terminal', '.shell > .dock'], ['Files', '.shell > .inspector'], ['Conversation', '.shell > .main']]) {
    await switcher.getByRole('button', { name: pane }).click();
    const shown = () => page.evaluate(() => ['.shell > .main', '.shell > .inspector', '.shell > .dock']
      .filter((sel) => { const el = document.querySelector(sel); return el && getComputedStyle(el).display !== 'none'; }));
    await page.waitForFunction((want) => ['.shell > .main', '.shell > .inspector', '.shell > .dock']
      .filter((sel) => { const el = document.querySelector(sel); return el && getComputedStyle(el).display !== 'none'; }).join() === want, shows)
      .catch(async () => { throw new Error(`at 390 px with ${pane} chosen, the panes shown are ${await shown()}`); });
    await expectLayout(page, `390 px, ${pane}`);
  }
  await shot(page, 'narrow');

  step('the panes resize by dragging, and the sizes are remembered; the theme toggle is remembered');
  await page.setViewportSize({ width: 1280, height: 800 });
  const before = await paneBox(page, '.shell > .inspector');
  const grip = await paneBox(page, '.rz-insp');
  const cx = grip.x + grip.width / 2;
  await page.mouse.move(cx, grip.y + 200);
  await page.mouse.down();
  await page.mouse.move(cx + 100, grip.y + 200, { steps: 4 });
  await page.mouse.up();
  const after = await paneBox(page, '.shell > .inspector');
  if (Math.abs(before.width - after.width - 100) > 1.5) throw new Error(`the inspector went from ${before.width} to ${after.width} px, not 100 px narrower`);
  await page.mouse.move(cx + 100, grip.y + 200); // as wide as can be: the conversation still keeps 480 px
  await page.mouse.down();
  await page.mouse.move(cx - 600, grip.y + 200, { steps: 4 });
  await page.mouse.up();
  const widest = await paneBox(page, '.shell > .main');
  if (widest.width < 480) throw new Error(`dragging the inspector squeezed the conversation to ${widest.width} px`);
  const final = await paneBox(page, '.shell > .inspector');
  const dockBefore = await paneBox(page, '.dock-body');
  const dockGrip = await paneBox(page, '.rz-dock');
  const cy = dockGrip.y + dockGrip.height / 2;
  await page.mouse.move(dockGrip.x + 400, cy);
  await page.mouse.down();
  await page.mouse.move(dockGrip.x + 400, cy - 60, { steps: 3 });
  await page.mouse.up();
  const dockAfter = await paneBox(page, '.dock-body');
  if (Math.abs(dockAfter.height - dockBefore.height - 60) > 1.5) throw new Error(`the dock went from ${dockBefore.height} to ${dockAfter.height} px, not 60 px taller`);
  const theme = page.locator('.theme-toggle');
  // One click at a time: the label changes with the render, after the click.
  for (let i = 0; i < 3 && !/Theme: dark/.test(await theme.getAttribute('aria-label')); i++) {
    const before = await theme.getAttribute('aria-label');
    await theme.click();
    await page.waitForFunction((b) => document.querySelector('.theme-toggle').getAttribute('aria-label') !== b, before);
  }
  if (await page.evaluate(() => localStorage.getItem('lathe.theme')) !== '"dark"') throw new Error('the dark theme was not stored');
  await page.reload();
  await open();
  const kept = await paneBox(page, '.shell > .inspector');
  if (Math.abs(kept.width - final.width) > 1) throw new Error(`after a reload the inspector is ${kept.width} px, not ${final.width}`);
  const dockKept = await paneBox(page, '.dock-body');
  if (Math.abs(dockKept.height - dockAfter.height) > 1) throw new Error(`after a reload the dock is ${dockKept.height} px, not ${dockAfter.height}`);
  // The stored theme is applied as the page starts; wait for it to settle.
  await page.waitForFunction(() => getComputedStyle(document.body).backgroundColor === 'rgb(21, 23, 26)', null, { timeout: 5000 })
    .catch(async () => { throw new Error(`the dark theme, chosen and reloaded, has background ${await page.evaluate(() => getComputedStyle(document.body).backgroundColor)}`); });
  await expectLayout(page, '1280 px, dark');
  await shot(page, 'dark');
  while (!/Theme: system/.test(await theme.getAttribute('aria-label'))) await theme.click();
  await page.evaluate(() => localStorage.removeItem('lathe.sizes'));

  step('rewind to the first turn, confirmed: the later turns are hidden');
  await turn(1).getByRole('button', { name: 'Rewind to here…' }).click();
  const dialog = page.getByRole('dialog', { name: 'Rewind the conversation?' });
  await expectText(dialog, '4 later turns');
  await dialog.getByRole('button', { name: 'Rewind' }).click();
  await dialog.waitFor({ state: 'hidden' });
  await transcript().locator('.turn').nth(1).waitFor({ state: 'detached' });
  await page.reload();
  await open();
  await expectText(status(1), 'Done');
  if ((await transcript().locator('.turn').count()) !== 1) throw new Error('the rewound turns came back after a reload');

  step('edit and resend the first message: confirmed (files stay), it rewinds to before it and sends the new text');
  await turn(1).getByRole('button', { name: 'Edit and resend your message' }).click();
  const resend = page.getByRole('dialog', { name: 'Edit and resend?' });
  await expectText(resend, 'Files stay as they are now');
  await resend.getByLabel('Message').fill('write the greeting, in French');
  await resend.getByRole('button', { name: 'Rewind and resend' }).click();
  await resend.waitFor({ state: 'hidden' });
  await expectText(turn(1).locator('.user-turn .text'), 'write the greeting, in French');
  await expectText(status(1), 'Failed', TURN); // the script has no turn left: the provider refuses it
  if ((await transcript().locator('.turn').count()) !== 1) throw new Error('the edited message did not replace the turn');
  const onDisk = await fs.readFile(path.join(wsDir, 'notes', 'hello.txt'), 'utf8');
  if (onDisk !== 'hi from the agent\n') throw new Error(`the rewind touched a file: ${JSON.stringify(onDisk)}`);

  if (problems.length) throw new Error(problems.join('\n'));
}

await drive({ browser, page, problems }, run);
