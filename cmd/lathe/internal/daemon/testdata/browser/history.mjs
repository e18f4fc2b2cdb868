// The History view in a real headless Chromium against a real daemon,
// driven by history_browser_test.go. No sleeps: every wait is Playwright's
// auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL (no API key: auth is off)
//   LATHE_SESSION    a Session renamed twice ("first" → "second" → "third")
//   LATHE_ARTIFACTS  where a failure's screenshot goes
//
// Flows: the trail lists who did what, grouped and in seq order; choosing
// an entry shows the Session as it was then (its name at that point), and
// "Back to now" leaves the past; the scrubber moves through the trail; the
// kind filter narrows the trail; the audit head and the export link show;
// a deep link to the History survives a reload; the layout holds at three
// widths.

import { launch, drive, step, shot, expectText, expectLayout } from './harness.mjs';

const base = process.env.LATHE_URL;
const sessionId = process.env.LATHE_SESSION;

// The composer asks the Agent's model server for its models, and none runs here.
const expected = (r) => r.status() === 502 && new URL(r.url()).pathname === '/api/llm/models';
const browsing = await launch({ viewport: { width: 1280, height: 800 }, expected });
const { page } = browsing;

async function run() {
  step('open the History of the Session');
  await page.goto(`${base}/#/sessions/${encodeURIComponent(sessionId)}/history`);
  await page.locator('[data-conn="live"]').waitFor();
  const trail = page.getByRole('list', { name: 'Audit trail' });
  await expectText(trail, 'created the Session "first"');
  await expectText(trail, 'renamed the Session to "second"');
  await expectText(trail, 'renamed the Session to "third"');
  await expectText(trail.locator('.actor').first(), 'operator · this machine');
  const summaries = await trail.locator('.summary').allTextContents();
  const order = ['created the Session', 'renamed the Session to "second"', 'renamed the Session to "third"']
    .map((s) => summaries.findIndex((x) => x.includes(s)));
  if (order.some((i) => i < 0) || !(order[0] < order[1] && order[1] < order[2])) throw new Error(`trail out of order: ${summaries.join(' | ')}`);

  step('time travel: the Session as of the first rename');
  await trail.locator('.entry', { hasText: 'renamed the Session to "second"' }).getByRole('button').click();
  const status = page.getByRole('status').filter({ hasText: 'Viewing as of seq' });
  await status.waitFor();
  const past = page.getByLabel('The Session as it was');
  await expectText(past, 'second');
  if ((await past.textContent()).includes('third')) throw new Error('the past shows the present name');
  // The centre shows the conversation itself as of that point, read-only.
  await page.getByRole('region', { name: 'Conversation as it was' }).waitFor();
  if (await page.getByLabel('Message to the Agent').count()) throw new Error('the composer shows over a past conversation');
  await shot(page, 'history');
  await page.locator('.past-banner').getByRole('button', { name: 'Back to now' }).click();
  await status.waitFor({ state: 'detached' });
  await page.getByLabel('Message to the Agent').waitFor();

  step('the scrubber: to the start shows the first name');
  const scrub = page.getByLabel('Scrub through the history');
  await scrub.fill('0');
  await scrub.dispatchEvent('change');
  await expectText(page.getByLabel('The Session as it was'), 'first');
  await page.locator('.history').getByRole('button', { name: 'Back to now' }).click();

  step('the kind filter narrows the trail');
  await page.getByRole('checkbox', { name: 'session' }).uncheck();
  await trail.locator('.entry', { hasText: 'renamed the Session' }).first().waitFor({ state: 'detached' });
  await page.getByRole('checkbox', { name: 'session' }).check();
  await expectText(trail, 'renamed the Session to "third"');

  step('the audit head and the export');
  await expectText(page.locator('.history-foot'), 'Audit head: seq');
  const href = await page.getByRole('link', { name: 'Export' }).getAttribute('href');
  if (!href.includes('/audit?format=ndjson')) throw new Error(`export link ${href}`);
  const exported = await page.evaluate(async (u) => (await fetch(u)).text(), href);
  if (exported.trim().split('\n').length < 3) throw new Error(`export: ${exported}`);

  step('the deep link survives a reload');
  await page.reload();
  await expectText(page.getByRole('list', { name: 'Audit trail' }), 'renamed the Session to "third"');

  step('layout at three widths');
  for (const width of [1024, 800, 390]) {
    await page.setViewportSize({ width, height: 800 });
    await expectLayout(page, `history at ${width}`);
  }
}

await drive(browsing, run);
