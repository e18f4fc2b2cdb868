// A worktree Session's way home, in a real headless Chromium against a
// daemon with real sandboxes, git and the scripted model, driven by
// worktree_browser_test.go (TestWorktreeInChromium). No sleeps: every wait
// is Playwright's auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL (no API key: auth is off)
//   LATHE_SHARED     a Ready shared Session of the Workspace
//   LATHE_WORKSPACE  its folder: a repository on main whose calc.py has "a - b";
//                    the scripted model's first turn edits it to "a + b" and
//                    writes NEWS.md
//   LATHE_ARTIFACTS  where a failure's screenshot goes
//
// Prints "SIGNAL worktree <id>" once the worktree Session exists, so the
// test can check its record and delete it should the flow stop short.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { drive, expectLayout, expectText, launch, shot, step } from './harness.mjs';

const base = process.env.LATHE_URL;
const shared = process.env.LATHE_SHARED;
const wsDir = process.env.LATHE_WORKSPACE;
const READY = 90_000; // a sandbox start on a loaded 2-core machine
const TURN = 60_000;
const git = (...args) => execFileSync('git', ['-C', wsDir, ...args], { encoding: 'utf8' });
const read = (name) => fs.readFile(path.join(wsDir, name), 'utf8').catch(() => null);

// Refusals the flow causes on purpose: the merge over an untracked file,
// and the model list without a model server.
const expected = (r) => {
  const u = new URL(r.url());
  return (r.status() === 502 && u.pathname === '/api/llm/models') ||
    (r.status() === 409 && r.request().method() === 'POST' && /^\/api\/sessions\/[^/]+\/merge$/.test(u.pathname));
};
const browsing = await launch({ viewport: { width: 1400, height: 900 }, expected });
const { page } = browsing;

/** show switches the workbench to a route, as a link would. */
const show = (hash) => page.evaluate((h) => { location.hash = h; }, hash);

/** same fails unless the Workspace folder is as it was: HEAD, calc.py, and the untracked NEWS.md. */
async function same(before, what) {
  const now = { head: git('rev-parse', 'HEAD').trim(), status: git('status', '--porcelain'), calc: await read('calc.py'), news: await read('NEWS.md') };
  if (JSON.stringify(now) !== JSON.stringify(before)) throw new Error(`${what} changed the Workspace folder: ${JSON.stringify(before)} → ${JSON.stringify(now)}`);
}

async function run() {
  step('a shared Session works in the folder, so the New Session dialog offers its own copy first');
  await page.goto(`${base}/#/sessions/${encodeURIComponent(shared)}`);
  await expectText(page.locator('.session-head .env-badge'), 'Ready', READY);
  await page.getByRole('button', { name: '+ Session' }).click();
  const create = page.getByRole('dialog', { name: 'New Session' });
  await expectText(create.locator('.isolation-why'), 'already works in this folder');
  const own = create.getByRole('radio', { name: /^Own copy of the repository, on branch lathe\// });
  if (!(await own.isChecked()) || (await own.isDisabled())) throw new Error('the worktree is not the default choice');
  await create.getByLabel('Name', { exact: true }).fill('own copy');
  await create.getByRole('button', { name: 'Create Session' }).click();
  await page.waitForURL((u) => /#\/sessions\/[0-9A-Z]+/.test(u.hash) && !u.hash.includes(shared));
  const id = decodeURIComponent(page.url().split('#/sessions/')[1].split('/')[0]);
  console.log(`SIGNAL worktree ${id}`);
  await expectText(page.locator('.session-head .branch-chip'), `lathe/${id}`);
  await expectText(page.locator('.session-head .env-badge'), 'Ready', READY);

  step('a turn edits calc.py and writes NEWS.md in the worktree; the Workspace folder does not see them');
  const before = { head: git('rev-parse', 'HEAD').trim(), status: git('status', '--porcelain'), calc: await read('calc.py'), news: null };
  await page.getByLabel('Message to the Agent').fill('make add add');
  await page.getByLabel('Message to the Agent').press('Enter');
  const turn = page.locator('.turn').filter({ has: page.locator('.user-turn .text', { hasText: 'make add add' }) });
  await expectText(turn.locator('.turn-status'), 'Done', TURN);
  await same(before, 'the turn in the worktree');

  step('Source Control: nothing to merge before a commit, then one commit ahead with its files');
  await page.getByRole('button', { name: 'Source Control', exact: true }).click();
  const scm = page.getByRole('complementary', { name: 'Source Control' });
  const block = scm.getByRole('region', { name: 'Merge into the Workspace' });
  await expectText(block.locator('.worktree-ahead'), 'nothing to merge');
  if (await block.getByRole('button', { name: /^(Merge|Squash) / }).count()) throw new Error('a merge button shows with nothing to merge');
  await scm.getByLabel('Stage every change first').check();
  await scm.getByLabel('Commit message').fill('add adds');
  await scm.getByRole('button', { name: 'Commit all' }).click();
  await expectText(block.locator('.worktree-ahead'), '1 commit ahead of main in the Workspace');
  const files = block.getByRole('list', { name: 'Files the merge changes' });
  await expectText(files, 'calc.py');
  await expectText(files, 'NEWS.md');
  await expectText(block.getByRole('button', { name: 'Squash 1 commit into one on main' }), 'Squash');
  await shot(page, 'worktree-merge');
  await expectLayout(page, '1400 px with the merge block');
  await page.setViewportSize({ width: 800, height: 800 });
  await expectLayout(page, '800 px with the merge block');
  await page.setViewportSize({ width: 1400, height: 900 });

  step('an untracked NEWS.md in the Workspace folder: Merge is refused, naming it, and nothing changes');
  await fs.writeFile(path.join(wsDir, 'NEWS.md'), 'mine, untracked\n');
  const held = { ...before, status: git('status', '--porcelain'), news: 'mine, untracked\n' };
  await block.getByRole('button', { name: 'Merge 1 commit into main' }).click();
  const refusal = block.locator('.merge-refused');
  await expectText(refusal, 'The merge was refused');
  await expectText(refusal, 'NEWS.md');
  await same(held, 'the refused merge');
  await expectText(block.locator('.worktree-ahead'), '1 commit ahead of main in the Workspace');

  step('without it, Merge brings the commit home and the block says so');
  await fs.rm(path.join(wsDir, 'NEWS.md'));
  await block.getByRole('button', { name: 'Merge 1 commit into main' }).click();
  await expectText(block.locator('.merge-done'), 'Merged 1 commit into main as ');
  await expectText(block.locator('.worktree-ahead'), 'othing to merge'); // even with main, or behind its merge commit
  if (await block.locator('.merge-refused').count()) throw new Error('the refusal still shows after the merge');
  if (!(await read('calc.py'))?.includes('a + b')) throw new Error(`calc.py in the Workspace folder after the merge: ${await read('calc.py')}`);

  step('the shared Session of the Workspace sees the change');
  await show(`#/sessions/${encodeURIComponent(shared)}/files/calc.py`);
  const tree = page.getByRole('complementary', { name: 'Files' });
  await expectText(tree.locator('.cm-content'), 'a + b');

  step('deleting the worktree Session says its folder goes and where its branch stands');
  await show(`#/sessions/${encodeURIComponent(id)}`);
  await expectText(page.locator('.session-head .branch-chip'), `lathe/${id}`);
  await page.getByRole('button', { name: 'Session actions' }).click();
  await page.getByRole('dialog', { name: 'Session own copy' }).getByRole('button', { name: 'Delete…' }).click();
  const del = page.getByRole('dialog', { name: 'Delete this Session?' });
  await expectText(del, 'it has no uncommitted changes');
  await expectText(del, `Its branch lathe/${id} has nothing main lacks`);
  await del.getByRole('button', { name: 'Delete Session' }).click();
  await del.waitFor({ state: 'detached' });
}

await drive(browsing, run);
