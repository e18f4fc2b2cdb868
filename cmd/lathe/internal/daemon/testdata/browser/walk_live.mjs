// The second walk's live flows (issue 26) in a real headless Chromium
// against a daemon with real sandboxes, driven by walk_browser_test.go
// (TestWalkLiveInChromium). No sleeps: every wait is Playwright's
// auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL
//   LATHE_SESSION    a Ready Session whose Agent's first turn streams
//                    "Holding. ", stalls until SIGNAL release, then "Released."
//   LATHE_WORKSPACE  its Workspace: a repository with a.txt changed
//   LATHE_ARTIFACTS  where a failure's screenshot goes

import { execFileSync } from 'node:child_process';
import { drive, expectText, launch, shot, step } from './harness.mjs';

const base = process.env.LATHE_URL;
const id = process.env.LATHE_SESSION;
const wsDir = process.env.LATHE_WORKSPACE;
const git = (...args) => execFileSync('git', ['-C', wsDir, ...args], { encoding: 'utf8' });

// Refusals the flow causes on purpose: the commit of an index emptied
// behind the pane's back, and the model list without a model server.
const expected = (r) => {
  const u = new URL(r.url());
  return (r.status() === 502 && u.pathname === '/api/llm/models') ||
    (r.status() >= 400 && r.status() < 500 && r.request().method() === 'POST' && /^\/api\/sessions\/[^/]+\/git\/commit$/.test(u.pathname));
};
const browsing = await launch({ viewport: { width: 1280, height: 800 }, expected });
const { page, newPage } = browsing;

async function run() {
  step('two tabs on one Session');
  await page.goto(`${base}/#/sessions/${id}`);
  await expectText(page.locator('.session-head .env-badge'), 'Ready', 90_000);
  const other = await newPage('second tab');
  await other.goto(`${base}/#/sessions/${id}`);
  await expectText(other.locator('.session-head .env-badge'), 'Ready');

  step("the second tab shows the running turn's user message, not an empty one");
  await page.getByLabel('Message to the Agent').fill('please hold the line');
  await page.getByLabel('Message to the Agent').press('Enter');
  const theirs = other.locator('.turn').last();
  await expectText(theirs.locator('.agent-turn'), 'Holding.');
  await expectText(theirs.locator('.user-turn .text'), 'please hold the line');
  if ((await theirs.locator('.turn-status').getAttribute('data-status')) !== 'running') throw new Error('the turn is no longer running: the message may have come from its record');

  step('a tab that reconnects mid-turn hydrates the message from the snapshot');
  await other.evaluate(() => lathe.live.drop('a test reconnect'));
  await other.locator('[data-conn="live"]').waitFor();
  await expectText(other.locator('.turn').last().locator('.user-turn .text'), 'please hold the line');
  console.log('SIGNAL release');
  await expectText(other.locator('.turn').last().locator('.agent-turn'), 'Released.', 60_000);
  await other.close();

  step("a write_file card shows the change against the file's previous content");
  // This tab too has seen the held turn end before it sends the next one
  // (a loaded machine may deliver its frames after the other tab's).
  await expectText(page.locator('.turn').last().locator('.turn-status'), 'Done', 60_000);
  await page.getByLabel('Message to the Agent').fill('rewrite a.txt');
  await page.getByLabel('Message to the Agent').press('Enter');
  // The turn by its message: '.turn' last() may still be the turn before
  // while this one's accept is on its way, and that one is Done already.
  const mine = page.locator('.turn').filter({ has: page.locator('.user-turn .text', { hasText: 'rewrite a.txt' }) });
  await expectText(mine.locator('.turn-status'), 'Done', 60_000);
  const card = mine.locator('.tool-card').filter({ hasText: 'write_file a.txt' });
  await card.locator('summary').first().click({ timeout: 60_000 });
  const change = card.getByRole('region', { name: "The turn's change to a.txt" });
  await expectText(change.locator('tr.del'), 'l3');
  await expectText(change.locator('tr.add'), 'L3 rewritten');
  await expectText(change.locator('tr.add'), 'L17 rewritten');

  step('comment on two hunks, send them to the Agent: one review turn with both, lines and all');
  const comment = async (first, last, note) => {
    await change.getByRole('button', { name: `Select line ${first} of a.txt`, exact: true }).click();
    if (last) await change.getByRole('button', { name: `Select line ${last} of a.txt`, exact: true }).click({ modifiers: ['Shift'] });
    await change.getByRole('button', { name: 'Comment…' }).click();
    await change.getByRole('textbox').fill(note);
    await change.getByRole('button', { name: 'Add comment' }).click();
  };
  await comment(3, 0, 'say why it changed');
  // The second in the side-by-side layout: the same lines, the same names.
  await change.getByRole('button', { name: 'Side by side' }).click();
  await change.locator('table.split').waitFor();
  await comment(17, 18, 'keep l18 as it was');
  await change.getByRole('button', { name: 'Unified' }).click();
  const tray = page.getByRole('region', { name: 'Review comments' });
  await expectText(tray, '2 comments on 1 file');
  await expectText(tray, 'lines 17-18');
  await shot(page, 'review-tray');
  await tray.getByRole('button', { name: 'Send to Agent' }).click();
  const review = page.locator('.turn').filter({ has: page.getByRole('group', { name: /^Review: 2 comments on 1 file/ }) });
  await expectText(review.getByRole('group', { name: /^Review: 2 comments on 1 file/ }), 'keep l18 as it was');
  await expectText(review.locator('.turn-status'), 'Done', 60_000);
  await tray.waitFor({ state: 'detached' });

  step('stage a.txt, then the index is committed behind the pane: the refusal shows beside Commit');
  await page.getByRole('button', { name: 'Source Control', exact: true }).click();
  const scm = page.getByRole('complementary', { name: 'Source Control' });
  await scm.getByRole('button', { name: 'Stage a.txt' }).click();
  const commit = scm.locator('.commit-box button[type="submit"]');
  await expectText(commit, 'Commit 1 staged');
  await scm.getByLabel('Commit message').fill('from the pane');
  git('commit', '-q', '-m', 'behind the pane');
  await scm.getByLabel('Commit message').press('Control+Enter');
  const refusal = scm.locator('.commit-error');
  await expectText(refusal, 'committed');
  const beside = await refusal.evaluate((el) => {
    const r = el.getBoundingClientRect();
    return { inView: r.top >= 0 && r.bottom <= innerHeight, afterButton: !!el.previousElementSibling?.querySelector('button[type="submit"]') };
  });
  if (!beside.inView || !beside.afterButton) throw new Error(`the refusal is not beside the Commit button: ${JSON.stringify(beside)}`);
  await expectText(commit, 'Nothing staged');
  if (!(await commit.isDisabled())) throw new Error('Commit stays enabled over an empty index');
  if (git('log', '-1', '--format=%s').trim() !== 'behind the pane') throw new Error('the pane committed over the changed index');
}

await drive(browsing, run);
