// The Ways panel in a real headless Chromium against a real daemon (real
// sandboxes, the scripted model), driven by ways_browser_test.go. No
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
  return (r.status() === 404 && m === 'GET' && /^\/api\/sessions\/[^/]+\/(turns|variants\/results)$/.test(u.pathname)) ||
    (r.status() === 502 && u.pathname === '/api/llm/models') ||
    (r.status() === 409 && m === 'GET' && /^\/api\/sessions\/[^/]+\/(git\/status|git\/branches|tree|tasks)$/.test(u.pathname)); // suspended surfaces
};
const browsing = await launch({ viewport: { width: 1400, height: 900 }, expected });
const { page } = browsing;
page.on('dialog', (d) => d.accept()); // the Keep confirmation

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

  step('the primary surfaces say why they are suspended');
  await page.getByRole('button', { name: 'Source Control', exact: true }).click();
  await expectText(page.getByRole('complementary', { name: 'Source Control' }), "this Session's Ways");
  await page.getByRole('button', { name: 'Ways', exact: true }).click();

  step("a lane's diff, before and after");
  await lane(1).getByRole('button', { name: 'a.txt' }).click();
  const diff = ways.getByLabel('Diff');
  await expectText(diff.locator('.before'), 'a staged');
  await expectText(diff.locator('.after'), 'rewritten by lane one');

  step('the cost table keeps an unknown price unknown');
  await ways.getByRole('button', { name: 'Cost' }).click();
  const cost = ways.getByRole('table', { name: 'Cost' });
  await expectText(cost, 'unknown'); // m2 has no price
  await expectText(cost, '$');
  await shot(page, 'ways');

  step('after a reload mid-set everything comes back');
  await page.reload();
  await expectText(page.getByRole('complementary', { name: 'Ways' }).getByRole('article', { name: 'Attempt 1' }), 'Lane one rewrote a.txt.', LANES);

  step('Keep lane 1: its change lands as a working-tree change');
  await page.getByRole('complementary', { name: 'Ways' }).getByRole('article', { name: 'Attempt 1' }).getByRole('button', { name: 'Keep' }).click();
  await page.getByRole('complementary', { name: 'Ways' }).locator('.ways-set[data-state="kept"]').waitFor({ timeout: LANES });
  const a = await fs.readFile(path.join(wsDir, 'a.txt'), 'utf8');
  if (a !== 'rewritten by lane one\n') throw new Error(`a.txt after Keep: ${JSON.stringify(a)}`);
  await expectText(page.locator('.transcript'), 'Lane one rewrote a.txt.', LANES);
}

await drive(browsing, run);
