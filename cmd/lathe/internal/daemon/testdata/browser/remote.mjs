// A remote Session (sandbox.provider remote on this machine's dockerd) in a
// real headless Chromium, driven by remote_browser_test.go
// (TestRemoteInChromium): the New Session dialog names the template, a turn
// writes hello.txt in the clone, a terminal commits it, the Preview frames
// a server started in the sandbox, and Source Control refuses a sync while
// the clone is dirty, then syncs the branch home. No sleeps: every wait is
// Playwright's auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL (no API key: auth is off); the
//                    browser opens it as http://localhost:PORT, the origin
//                    whose *.localhost subdomains are the Preview's
//   LATHE_WORKSPACE  the Workspace folder: a repository on main with
//                    README.md, and draft.txt uncommitted; the scripted
//                    model's first turn writes hello.txt
//   LATHE_ARTIFACTS  where a failure's screenshot goes
//
// Prints "SIGNAL remote <id>" once the Session exists, so the test can
// delete it should the flow stop short.

import { execFileSync } from 'node:child_process';
import { drive, expectLayout, expectText, launch, newTerminal, shot, step } from './harness.mjs';

const port = new URL(process.env.LATHE_URL).port;
const base = `http://localhost:${port}`;
const wsDir = process.env.LATHE_WORKSPACE;
const READY = 120_000; // a container start and a clone on a loaded 2-core machine
const TURN = 60_000;
const git = (...args) => execFileSync('git', ['-C', wsDir, ...args], { encoding: 'utf8' });
const hasBranch = (b) => git('branch', '--list', b).trim() !== '';

// Refusals the flow causes on purpose, or that a test machine gives.
const expected = (r) => {
  const u = new URL(r.url());
  return (r.status() === 502 && u.pathname === '/api/llm/models') || // no model server on a test machine
    (r.status() === 409 && r.request().method() === 'POST' && /^\/api\/sessions\/[^/]+\/sync$/.test(u.pathname)) || // the dirty clone
    (r.status() === 502 && u.hostname.endsWith('.localhost')); // the Preview before its server listens
};
const browsing = await launch({ viewport: { width: 1400, height: 900 }, expected });
const { page } = browsing;

/** until clicks again until check passes, each wait bounded, the whole within ms. */
async function until(check, again, ms = 60_000) {
  for (const deadline = Date.now() + ms; ;) {
    try {
      await check();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await again();
    }
  }
}

async function run() {
  step('the New Session dialog names the template instead of an image field');
  await page.goto(`${base}/`);
  const create = page.getByRole('dialog', { name: 'New Session' });
  const newSession = () => page.getByRole('button', { name: '+ Session' }).click();
  await newSession();
  await until(() => create.waitFor({ timeout: 3_000 }), newSession, 15_000); // a click before the workbench's first render is lost
  await expectText(create.locator('.remote-template'), 'template lathe.local/sandbox:bookworm on the remote Docker engine');
  if (await create.locator('input[name="image"]').count()) throw new Error('an image field shows under the remote provider');
  if (await create.getByRole('radiogroup', { name: 'Where its code lives' }).count()) throw new Error('the worktree choice shows under the remote provider (each Session is a clone)');
  await create.getByLabel('Name', { exact: true }).fill('remote work');
  await create.getByLabel('Exposed ports').fill('8000');
  await create.getByRole('button', { name: 'Create Session' }).click();
  await page.waitForURL((u) => /#\/sessions\/[0-9A-Z]+/.test(u.hash));
  const id = decodeURIComponent(page.url().split('#/sessions/')[1].split('/')[0]);
  const branch = `lathe/${id}`;
  console.log(`SIGNAL remote ${id}`);
  await expectText(page.locator('.session-head .env-badge'), 'Ready', READY);

  step('a turn writes hello.txt in the clone');
  await page.getByLabel('Message to the Agent').fill('write a note');
  await page.getByLabel('Message to the Agent').press('Enter');
  const turn = page.locator('.turn').filter({ has: page.locator('.user-turn .text', { hasText: 'write a note' }) });
  await expectText(turn.locator('.turn-status'), 'Done', TURN);

  step('Source Control names the branch; a sync of the dirty clone is refused, commit first, and nothing comes home');
  await page.getByRole('button', { name: 'Source Control', exact: true }).click();
  const scm = page.getByRole('complementary', { name: 'Source Control' });
  const block = scm.getByRole('region', { name: 'Bring the work home' });
  await expectText(block.locator('.sync-where'), branch);
  await expectText(block.locator('.sync-why'), 'Commit the ');
  const sync = block.getByRole('button', { name: `Sync to branch ${branch}` });
  await sync.click();
  await expectText(block.locator('.sync-refused'), 'Commit first: the clone has uncommitted changes');
  if (hasBranch(branch)) throw new Error(`the refused sync made ${branch}`);

  step('a terminal in the sandbox commits the turn’s file');
  await newTerminal(page);
  await page.keyboard.type("git add -A && git -c user.name=Remote -c user.email=remote@example.org commit -qm 'hello from the sandbox'\n");
  await until(() => expectText(block.locator('.sync-commits li'), 'hello from the sandbox', 3_000),
    () => scm.getByRole('button', { name: 'Refresh' }).click());
  await expectText(block.locator('.sync-brings'), `Brings 1 commit of the clone’s branch main that the Workspace’s HEAD lacks, to ${branch}:`);
  if (await block.locator('.sync-commits li').count() !== 1) throw new Error('the sync block lists other commits than the one made in the sandbox');
  if (await block.locator('.sync-refused').count()) throw new Error('“commit first” still shows beside the committed clone');
  await shot(page, 'remote-sync-brings');

  step('the Preview frames a server started in the sandbox, listing the clone');
  await page.getByRole('tab', { name: /^Tasks/ }).click();
  await page.getByLabel('Command to run in the background').fill('exec python3 -m http.server 8000');
  await page.locator('.dock').getByRole('button', { name: 'Run', exact: true }).click();
  await page.locator('.task').filter({ hasText: 'http.server' }).first().waitFor();
  await page.getByRole('button', { name: 'Preview', exact: true }).click();
  const pane = page.getByRole('complementary', { name: 'Preview' });
  const frame = page.frameLocator('iframe[title="Preview of port 8000"]');
  await until(() => frame.locator('a[href="hello.txt"]').waitFor({ timeout: 3_000 }),
    () => pane.getByRole('button', { name: 'Reload' }).click());

  step('Sync brings the commit home as lathe/<id>');
  await page.getByRole('button', { name: 'Source Control', exact: true }).click();
  await sync.click();
  await expectText(block.locator('.sync-done'), `Branch ${branch} is at `);
  if (await block.locator('.sync-refused').count()) throw new Error('the refusal still shows after the sync');
  const home = git('show', `${branch}:hello.txt`);
  if (!home.includes('written in the remote sandbox')) throw new Error(`hello.txt on ${branch}: ${home}`);
  await expectText(block.locator('.sync-brings'), `Already home: ${branch} is at `); // the re-read after the sync
  if (await block.locator('.sync-commits').count()) throw new Error('the sync block still lists commits once they are home');
  await scm.getByRole('button', { name: 'Refresh' }).waitFor(); // not "Reading…"
  await expectText(page.locator('.session-head .remote-chip'), 'remote');
  await shot(page, 'remote-sync');
  await expectLayout(page, '1400 px with the sync block');

  step('the close confirmation says the work goes home first');
  await page.getByRole('button', { name: 'Session actions' }).click();
  await page.getByRole('dialog', { name: 'Session remote work' }).getByRole('button', { name: 'Close…' }).click();
  const close = page.getByRole('dialog', { name: 'Close this Session?' });
  await expectText(close.locator('.remote-home'), `its work is brought home to branch ${branch}`);
  await close.getByRole('button', { name: 'Cancel' }).click();
  await close.waitFor({ state: 'detached' });
}

await drive(browsing, run);
