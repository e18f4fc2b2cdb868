// The Ways panel in a real headless Chromium against a real daemon (real
// sandboxes, the scripted model), driven by ways_browser_test.go: two sets
// in a row, the second judged by the judge Agent chosen in the panel. No
// sleeps: every wait is Playwright's auto-waiting or an expectation with a
// timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL (http://127.0.0.1:PORT)
//   LATHE_SESSION    a Ready single-Agent Session on a Git Workspace whose
//                    a.txt is committed ("a"), staged ("a staged")
//   LATHE_WORKSPACE  that Workspace's directory
//   LATHE_ARTIFACTS  where a failure's screenshot goes

import fs from 'node:fs/promises';
import path from 'node:path';
import { drive, expectText, launch, shot, step } from './harness.mjs';

const direct = process.env.LATHE_URL;
const id = process.env.LATHE_SESSION;
const wsDir = process.env.LATHE_WORKSPACE;
const base = `http://localhost:${new URL(direct).port}`;
const LANES = 90_000; // two sandboxes and their turns on a loaded 2-core machine

// Refusals the flow causes on purpose.
const expected = (r) => {
  const u = new URL(r.url());
  const m = r.request().method();
  return (r.status() === 404 && m === 'GET' && /^\/api\/sessions\/[^/]+\/turns$/.test(u.pathname)) ||
    (r.status() === 502 && u.pathname === '/api/llm/models') ||
    (r.status() === 409 && m === 'GET' && /^\/api\/sessions\/[^/]+\/(git\/status|git\/branches|tree|tasks)$/.test(u.pathname)); // suspended surfaces
};
const browsing = await launch({ viewport: { width: 1400, height: 900 }, expected });
const { page } = browsing;
page.on('dialog', (d) => { browsing.problems.push(`a native ${d.type()} dialog: ${d.message()}`); d.dismiss(); }); // confirmations are in-page

async function run() {
  step('open the Session and its Ways panel');
  await page.goto(`${base}/#/sessions/${id}`);
  await expectText(page.locator('.session-head .env-badge'), 'Ready', LANES);
  await page.getByRole('button', { name: 'Ways', exact: true }).click();
  const ways = page.getByRole('complementary', { name: 'Ways' });
  await ways.getByLabel('Task').fill('Rewrite a.txt');
  await ways.getByLabel('Models').fill('m1,m2');

  step('preview the plan');
  await ways.getByRole('button', { name: 'Preview plan' }).click();
  await expectText(ways.getByLabel('Plan'), 'rewrite it');

  step('start two Ways; the lanes stream side by side');
  await ways.getByRole('button', { name: 'Start 2 Ways' }).click();
  const lane = (i) => ways.getByRole('article', { name: `Attempt ${i}` });
  await expectText(lane(0), 'Lane zero', LANES);
  await expectText(lane(1), 'Lane one', LANES);
  await lane(0).and(page.locator('[data-state="succeeded"]')).waitFor({ timeout: LANES });
  await lane(1).and(page.locator('[data-state="succeeded"]')).waitFor({ timeout: LANES });
  await expectText(lane(1), 'a.txt');

  step('the primary surfaces say why they are suspended, the composer too');
  const first = await ways.locator('.ways-set').getAttribute('data-set');
  await page.getByRole('button', { name: 'Source Control', exact: true }).click();
  await expectText(page.getByRole('complementary', { name: 'Source Control' }), "this Session's Ways");
  await expectText(page.locator('.composer .ways-hold'), `Suspended while Ways set ${first} decides`);
  if (!(await page.getByLabel('Message to the Agent').isDisabled())) throw new Error('the composer takes a message while a Ways set owns the Workspace');
  await page.locator('.composer .ways-hold').getByRole('button', { name: 'Open the Ways' }).click();
  await ways.locator('.ways-set').waitFor();

  step("a lane's diff, before and after");
  await lane(1).getByRole('button', { name: 'a.txt' }).click();
  const diff = ways.getByLabel('Diff', { exact: true });
  await expectText(diff.locator('tr.del'), 'a staged');
  await expectText(diff.locator('tr.add'), 'rewritten by lane one');
  await diff.getByRole('button', { name: 'Side by side' }).click();
  await expectText(diff.locator('tr').filter({ has: page.locator('td.code.del') }).locator('td.code.add'), 'rewritten by lane one'); // the change beside what it replaced
  await shot(page, 'ways-diff');
  await diff.getByRole('button', { name: 'Unified' }).click();

  step('the cost table keeps an unknown price unknown, never $0.0000');
  await ways.getByRole('button', { name: 'Cost' }).click();
  const cost = ways.getByRole('table', { name: 'Cost' });
  await expectText(cost, 'cost unknown'); // m2 has no price
  await expectText(cost, '$');
  await expectText(cost, 'unknown: m2 has no price'); // why the saving is unknown
  await expectText(lane(1).locator('.lane-cost'), 'cost unknown');
  if ((await ways.textContent()).includes('$0.0000')) throw new Error('an unpriced Attempt shows $0.0000');
  await shot(page, 'ways');

  step('after a reload mid-set everything comes back');
  await page.reload();
  await expectText(page.getByRole('complementary', { name: 'Ways' }).getByRole('article', { name: 'Attempt 1' }), 'Lane one rewrote a.txt.', LANES);

  step('Keep lane 1, confirmed in the page with its files named: its change lands as a working-tree change');
  const panel = page.getByRole('complementary', { name: 'Ways' });
  await panel.getByRole('article', { name: 'Attempt 1' }).getByRole('button', { name: 'a.txt' }).click();
  await panel.getByLabel('Diff', { exact: true }).waitFor();
  await panel.getByRole('article', { name: 'Attempt 1' }).getByRole('button', { name: 'Keep' }).click();
  const keep = page.getByRole('dialog', { name: 'Keep Attempt 1 (m2)?' });
  await expectText(keep, 'a.txt');
  await keep.getByRole('button', { name: 'Keep this Attempt' }).click();
  await panel.locator('.ways-set[data-state="kept"]').waitFor({ timeout: LANES });
  const a = await fs.readFile(path.join(wsDir, 'a.txt'), 'utf8');
  if (a !== 'rewritten by lane one\n') throw new Error(`a.txt after Keep: ${JSON.stringify(a)}`);
  await expectText(page.locator('.transcript'), 'Lane one rewrote a.txt.', LANES);
  await expectText(panel.locator('.keep-phase'), "Attempt 1's changes are in your working tree, uncommitted");
  if ((await panel.textContent()).includes('transcript_recorded')) throw new Error('the Keep phase shows its internal name');
  await page.locator('.composer .ways-hold').waitFor({ state: 'detached' });

  step('a second set: every view follows it, and the judge chosen in the panel ranks it');
  await panel.getByLabel('Diff', { exact: true }).waitFor({ timeout: 1000 }); // the first set's, shown since before its Keep
  if (await panel.getByRole('article', { name: 'Attempt 1' }).getByRole('button', { name: 'a.txt' }).count()) throw new Error("a kept set's diff is offered, though its copies are gone");
  await panel.getByLabel('Task').fill('Second pass');
  await panel.getByLabel('Models').fill('m1,m2');
  await panel.getByRole('button', { name: 'Start 2 Ways' }).click();
  await panel.locator(`.ways-set:not([data-set="${first}"])`).waitFor({ timeout: LANES });
  const second = await panel.locator('.ways-set').getAttribute('data-set');
  if (await panel.getByLabel('Diff', { exact: true }).count()) throw new Error("the first set's diff outlived it");
  if (await panel.getByRole('table', { name: 'Cost' }).count()) throw new Error("the first set's cost table outlived it");
  await expectText(page.locator('.composer .ways-hold'), `Suspended while Ways set ${second} decides`);
  await expectText(lane(0), 'Second zero', LANES); // streamed, or the ended lane's output
  await panel.locator('.ways-set[data-state="ready"]').waitFor({ timeout: LANES });
  await panel.getByLabel('Judge').selectOption('judge');
  await panel.getByRole('button', { name: 'Cost' }).click();
  const cost2 = panel.getByRole('table', { name: 'Cost' });
  if ((await cost2.getAttribute('data-set')) !== second) throw new Error(`the cost table is of set ${await cost2.getAttribute('data-set')}, not ${second}`);
  await expectText(cost2, 'cost unknown');
  await panel.getByRole('button', { name: 'Judge', exact: true }).click();
  await expectText(lane(1).locator('.reason'), 'the judge prefers this one', LANES);

  step('Discard all, confirmed in the page: the composer is back');
  await panel.getByRole('button', { name: 'Discard all' }).click();
  const discard = page.getByRole('dialog', { name: 'Discard every Attempt?' });
  await expectText(discard, 'The 2 Attempts');
  await discard.getByRole('button', { name: 'Discard all' }).click();
  await panel.locator('.ways-set[data-state="discarded"]').waitFor({ timeout: LANES });
  await page.locator('.composer .ways-hold').waitFor({ state: 'detached', timeout: LANES });
  if (await page.getByLabel('Message to the Agent').isDisabled()) throw new Error('the composer stays off after the set was discarded');
}

await drive(browsing, run);
