// The Source Control and Preview panes in a real headless Chromium against a
// real daemon (with real sandboxes), driven by scm_preview_test.go. No
// sleeps: every wait is Playwright's auto-waiting or an expectation with a
// timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL (http://127.0.0.1:PORT); the
//                    browser opens it as http://localhost:PORT, the origin
//                    the Preview's picker bridge answers
//   LATHE_KEY        an API key: the browser signs in with /?token=
//   LATHE_WORKSPACE  a Git repository: main and feature, two.txt changed in
//                    two hunks, other.txt changed, app.py the Preview app
//   LATHE_PLAIN      a folder that is not a Git repository
//   LATHE_ARTIFACTS  where a failure's screenshot goes
//
// Exits 1 on the first failure.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs/promises';
import path from 'node:path';
import { drive, expectText, launch, newTerminal, shot, step } from './harness.mjs';

const direct = process.env.LATHE_URL; // what node itself dials
const key = process.env.LATHE_KEY;
const wsDir = process.env.LATHE_WORKSPACE;
const plainDir = process.env.LATHE_PLAIN;
const READY = 90_000; // a sandbox start on a loaded 2-core machine
const daemonPort = new URL(direct).port;
const base = `http://localhost:${daemonPort}`;

/** call is one authenticated control-route request from node. */
async function call(method, p, body) {
  const r = await fetch(direct + p, {
    method, headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await r.json();
  if (!r.ok) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(data)}`);
  return data;
}

const git = (...args) => execFileSync('git', ['-C', wsDir, ...args], { encoding: 'utf8' });
const lines = (n, edits = {}) => Array.from({ length: n }, (_, i) => edits[i + 1] ?? String(i + 1)).join('\n') + '\n';

// Refusals the flows cause on purpose, or that a test machine gives.
const expected = (r) => {
  const u = new URL(r.url());
  const m = r.request().method();
  return (r.status() === 404 && m === 'GET' && /^\/api\/sessions\/[^/]+\/turns$/.test(u.pathname)) ||
    (r.status() === 502 && u.pathname === '/api/llm/models') || // no model server on a test machine
    (r.status() === 409 && m === 'POST' && /^\/api\/sessions\/[^/]+\/git\/hunk$/.test(u.pathname)) || // the stale hunk
    (r.status() === 409 && m === 'POST' && /^\/api\/sessions\/[^/]+\/git\/commit$/.test(u.pathname)) || // the changed checkout
    (r.status() === 409 && m === 'GET' && /^\/api\/sessions\/[^/]+\/git\/(status|branches)$/.test(u.pathname)) || // not a repository
    (r.status() === 502 && u.hostname.endsWith('.localhost')); // the Preview before its app listens
};
const browsing = await launch({ viewport: { width: 1400, height: 900 }, expected });
const { context, page } = browsing;

const sessionIds = [];

/** newSession creates a Session on a new Workspace for dir. */
async function newSession(dir, name, extra = {}) {
  const ws = await call('POST', '/api/workspaces', { path: dir });
  const s = await call('POST', `/api/workspaces/${ws.id}/sessions`, { name, mode: { kind: 'single_agent', agent_id: 'coder' }, ...extra });
  sessionIds.push(s.id);
  return s.id;
}

async function run() {
  step('a Session on the Git Workspace, exposing port 8000');
  const id = await newSession(wsDir, 'scm and preview', { exposed_ports: [8000] });
  await page.goto(`${base}/?token=${encodeURIComponent(key)}`);
  await page.goto(`${base}/#/sessions/${id}`);
  await expectText(page.locator('.session-head .env-badge'), 'Ready', READY);

  step("the Files tree leaves out Git's own folder");
  await page.getByRole('button', { name: 'Files', exact: true }).click();
  const tree = page.getByRole('complementary', { name: 'Files' });
  await tree.getByRole('button', { name: 'two.txt' }).waitFor({ timeout: READY });
  if (await tree.getByRole('button', { name: '.git/' }).count()) throw new Error('the Files tree lists .git/');
  await expectText(tree.getByRole('button', { name: 'two.txt modified' }).locator('.git-mark'), 'M'); // coloured, and a letter and a word
  if (await tree.getByRole('button', { name: /^app\.py/ }).locator('.git-mark').count()) throw new Error('an unchanged file has a Git mark');

  step('Source Control lists the changed files');
  await page.getByRole('button', { name: 'Source Control', exact: true }).click();
  await page.waitForURL(/\/git$/);
  const scm = page.getByRole('complementary', { name: 'Source Control' });
  const changes = scm.getByRole('region', { name: 'Changes', exact: true });
  const staged = scm.getByRole('region', { name: 'Staged changes' });
  const row = (region, p) => region.locator(`.scm-file[data-path="${p}"]`);
  await row(changes, 'two.txt').waitFor();
  await row(changes, 'other.txt').waitFor();
  await expectText(scm.locator('.panel-head'), '⎇ main');

  step('open a diff: two hunks');
  await row(changes, 'two.txt').locator('.tree-item').click();
  const diff = scm.getByRole('region', { name: 'Diff of two.txt' });
  await expectText(diff.getByRole('group', { name: 'Hunk 2' }), '+eighteen');
  const hunk = (n) => diff.getByRole('group', { name: `Hunk ${n}`, exact: true });
  if ((await diff.locator('li.hunk').count()) !== 2) throw new Error('two.txt does not show two hunks');
  const shown = await call('GET', `/api/sessions/${id}/git/hunks?path=two.txt&staged=false`);
  const [first, second] = shown.hunks;

  step('a hunk that changed since it was shown is refused, and says so');
  await fs.writeFile(path.join(wsDir, 'two.txt'), lines(20, { 2: 'two', 4: 'four', 18: 'eighteen' }));
  await hunk(1).getByRole('button', { name: 'Stage hunk' }).click();
  await expectText(diff.getByRole('alert'), 'refused');
  if (git('diff', '--cached', '--name-only').trim() !== '') throw new Error('the stale hunk was staged');
  await fs.writeFile(path.join(wsDir, 'two.txt'), lines(20, { 2: 'two', 18: 'eighteen' }));
  await scm.getByRole('button', { name: 'Refresh' }).click();
  await expectText(hunk(1).locator('.hunk-head'), first.header);

  step('stage exactly one hunk');
  await hunk(1).getByRole('button', { name: 'Stage hunk' }).click();
  await row(staged, 'two.txt').waitFor();
  const idx = await call('GET', `/api/sessions/${id}/git/hunks?path=two.txt&staged=true`);
  if (idx.hunks.length !== 1 || idx.hunks[0].header !== first.header || !idx.hunks[0].lines.includes('+two')) {
    throw new Error(`staged hunks ${JSON.stringify(idx.hunks)}, want only ${first.header}`);
  }
  const rest = await call('GET', `/api/sessions/${id}/git/hunks?path=two.txt&staged=false`);
  if (rest.hunks.length !== 1 || !rest.hunks[0].lines.includes('+eighteen')) throw new Error(`unstaged hunks ${JSON.stringify(rest.hunks)}, want only ${second.header}'s change`);
  const st = await call('GET', `/api/sessions/${id}/git/status`);
  const two = st.files.find((f) => f.path === 'two.txt');
  if (two.staged !== 'modified' || two.unstaged !== 'modified') throw new Error(`two.txt status ${JSON.stringify(two)}`);

  step('unstage it');
  await staged.getByRole('button', { name: 'Unstage two.txt' }).click();
  await row(staged, 'two.txt').waitFor({ state: 'detached' });
  if (git('diff', '--cached', '--name-only').trim() !== '') throw new Error('two.txt is still staged');

  step('discard a file, after a confirmation');
  await changes.getByRole('button', { name: 'Discard changes to other.txt…' }).click();
  const confirm = page.getByRole('dialog', { name: 'Discard changes to other.txt?' });
  await confirm.waitFor();
  if ((await fs.readFile(path.join(wsDir, 'other.txt'), 'utf8')) !== 'changed\n') throw new Error('discarded before the confirmation');
  await confirm.getByRole('button', { name: 'Discard', exact: true }).click();
  await row(changes, 'other.txt').waitFor({ state: 'detached' });
  const other = await fs.readFile(path.join(wsDir, 'other.txt'), 'utf8');
  if (other !== 'keep\n') throw new Error(`other.txt after the discard: ${JSON.stringify(other)}`);

  step('no commit identity: the fix is shown and Commit is off');
  const commitButton = scm.locator('.commit-box button[type="submit"]');
  await expectText(scm.locator('.commit-identity'), 'No commit identity is known');
  await expectText(scm.locator('.commit-identity'), 'git.author');
  await changes.getByRole('button', { name: 'Stage all', exact: true }).click();
  await row(staged, 'two.txt').waitFor();
  if (!(await commitButton.isDisabled())) throw new Error('Commit is enabled without a commit identity');

  step("the repository's own identity is shown before committing");
  git('config', 'user.name', 'Browser Tester');
  git('config', 'user.email', 'tester@example.org');
  await scm.getByRole('button', { name: 'Refresh' }).click();
  await expectText(scm.locator('.commit-identity'), "Commits as Browser Tester <tester@example.org>, from the repository's own git config");

  step('a commit after the checkout changed commits nothing, and says so');
  await scm.getByLabel('Commit message').fill('from the browser');
  await fs.writeFile(path.join(wsDir, 'sneaked.txt'), 'written after the status was read\n');
  await scm.getByLabel('Commit message').press('Control+Enter');
  await expectText(scm.getByRole('alert'), 'The checkout changed since its status was read, so nothing was committed');
  if (git('log', '-1', '--format=%s').trim() !== 'first') throw new Error('a commit was made over a changed checkout');
  await row(changes, 'sneaked.txt').waitFor(); // re-read without a Refresh
  await fs.rm(path.join(wsDir, 'sneaked.txt'));
  await scm.getByRole('button', { name: 'Refresh' }).click();
  await row(changes, 'sneaked.txt').waitFor({ state: 'detached' });

  step('commit what the pane shows');
  await scm.getByLabel('Commit message').press('Control+Enter'); // commits, as the button would
  await page.locator('.toast').getByText('Committed.', { exact: true }).waitFor(); // not the refusal's "nothing was committed."
  if (await scm.getByText('nothing was committed').count()) throw new Error('the changed-checkout warning outlived a commit');
  const subject = git('log', '-1', '--format=%s').trim();
  if (subject !== 'from the browser') throw new Error(`HEAD's subject is ${JSON.stringify(subject)}`);
  await expectText(changes, 'None.');

  step('check out a branch; over changes, after a confirmation');
  const branches = scm.getByRole('region', { name: 'Branches' });
  await branches.getByRole('button', { name: 'Check out feature' }).click();
  await expectText(scm.locator('.panel-head'), '⎇ feature');
  if (git('rev-parse', '--abbrev-ref', 'HEAD').trim() !== 'feature') throw new Error('HEAD is not feature');
  await fs.writeFile(path.join(wsDir, 'other.txt'), 'again\n');
  await scm.getByRole('button', { name: 'Refresh' }).click();
  await row(changes, 'other.txt').waitFor();
  await branches.getByRole('button', { name: 'Check out main' }).click();
  const co = page.getByRole('dialog', { name: 'Check out main?' });
  await co.getByRole('button', { name: 'Check out', exact: true }).click();
  await expectText(scm.locator('.panel-head'), '⎇ main');
  if ((await fs.readFile(path.join(wsDir, 'other.txt'), 'utf8')) !== 'again\n') throw new Error('the checkout lost the change it carried');

  step('the Check: set, run, exit code, duration and output');
  await scm.getByLabel('Check command').fill('echo checked-$((3*4)); exit 3');
  await scm.getByRole('button', { name: 'Run', exact: true }).click();
  const result = scm.locator('.check-result');
  await expectText(result, 'exit code 3', 60_000);
  await expectText(result, ' s');
  await expectText(result.locator('pre'), 'checked-12');
  const saved = await call('GET', `/api/sessions/${id}`);
  if (saved.check_command !== 'echo checked-$((3*4)); exit 3') throw new Error(`check_command is ${JSON.stringify(saved.check_command)}`);
  await shot(page, 'source-control');

  step('Source Control follows an editor save and a task without a Refresh');
  await page.getByRole('button', { name: 'Files', exact: true }).click();
  await tree.getByRole('button', { name: /^two\.txt/ }).click();
  const ed = tree.locator('.cm-content');
  await ed.waitFor();
  await ed.click();
  await page.keyboard.press('Control+End');
  await page.keyboard.type('saved in the editor');
  await page.keyboard.press('Control+s');
  await page.getByText('Saved two.txt').waitFor();
  await page.getByRole('button', { name: 'Source Control', exact: true }).click();
  await row(changes, 'two.txt').waitFor(); // no Refresh clicked
  await page.getByRole('tab', { name: /^Tasks/ }).click();
  await page.getByLabel('Command to run in the background').fill('echo made > made-by-task.txt');
  await page.locator('.dock').getByRole('button', { name: 'Run', exact: true }).click();
  await row(changes, 'made-by-task.txt').waitFor({ timeout: 60_000 }); // no Refresh clicked
  const term = await newTerminal(page);
  await page.keyboard.type('echo made > made-in-terminal.txt\n');
  await row(changes, 'made-in-terminal.txt').waitFor({ timeout: 60_000 }); // no Refresh clicked

  step('Source Control and the tree follow a process outside Lathe (a checkout watch) without a Refresh');
  await fs.writeFile(path.join(wsDir, 'made-outside.txt'), 'written by a process outside Lathe\n');
  await row(changes, 'made-outside.txt').waitFor({ timeout: 20_000 }); // no Refresh clicked, no task, no turn
  await page.getByRole('button', { name: 'Files', exact: true }).click();
  await tree.getByRole('button', { name: /^made-outside\.txt/ }).waitFor({ timeout: 20_000 });
  await page.getByRole('button', { name: 'Source Control', exact: true }).click();

  step('start the app in the sandbox as a background task');
  await page.getByRole('tab', { name: /^Tasks/ }).click();
  await page.getByLabel('Command to run in the background').fill(`exec python3 ${wsDir}/app.py 8000`);
  await page.locator('.dock').getByRole('button', { name: 'Run', exact: true }).click();
  await page.locator('.task').filter({ hasText: 'app.py' }).first().waitFor();

  step('the Preview frames the app from its own origin');
  await page.getByRole('button', { name: 'Preview', exact: true }).click();
  const pane = page.getByRole('complementary', { name: 'Preview' });
  const previewURL = `http://${id.toLowerCase()}-p8000.localhost:${daemonPort}/`;
  const frame = page.frameLocator('iframe[title="Preview of port 8000"]');
  if ((await pane.locator('iframe').getAttribute('src')) !== previewURL) throw new Error(`the iframe is not at ${previewURL}`);
  // The app may still be starting: reload until it answers (each wait bounded).
  for (const deadline = Date.now() + 60_000; ;) {
    try {
      await frame.locator('#greeting').waitFor({ timeout: 3_000 });
      break;
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await pane.getByRole('button', { name: 'Reload' }).click();
    }
  }
  if ((await pane.getByRole('link', { name: 'Open in a new tab' }).getAttribute('href')) !== previewURL) throw new Error('the new-tab link is wrong');

  // A framed Preview is a cross-site frame (every *.localhost host is a
  // site of its own), so its cookies are third-party ones: Chromium keeps
  // them when partitioned (the app sets SameSite=None; Secure; Partitioned).
  step("the app's cookie stays on the Preview origin");
  const jar = (u) => context.cookies(u).then((cs) => cs.map((c) => c.name));
  if (!(await jar(previewURL)).includes('preview_app')) throw new Error('the Preview origin has no preview_app cookie');
  if ((await jar(base)).includes('preview_app')) throw new Error("the app's cookie reached the workbench origin");
  if ((await page.evaluate(() => document.cookie)).includes('preview_app')) throw new Error("the workbench's document.cookie has the app's cookie");

  step('pick an element: it becomes a reference chip in the composer');
  const pick = pane.getByRole('button', { name: 'Pick an element' });
  await pick.click(); // enabled once the bridge said ready
  await pane.getByRole('button', { name: /^Picking/ }).waitFor();
  // A message from any other window is ignored, even with the right request.
  await page.evaluate(() => window.postMessage({
    protocol: 'lathe-picker', version: 1, type: 'picked', request_id: lathe.preview.picking,
    reference: { url: 'http://evil/', selector: '#evil', tag: 'div', text: 'spoofed' },
  }, '*'));
  await frame.locator('#go').click();
  const refs = page.getByRole('list', { name: 'References' });
  await expectText(refs, ':8000 #go');
  const got = await page.evaluate((sid) => lathe.conversation.composer(sid).refs, id);
  if (got.length !== 1) throw new Error(`the composer holds ${got.length} references: ${JSON.stringify(got)}`);
  const r = got[0];
  if (r.kind !== 'preview' || r.port !== 8000 || r.tag !== 'button' || r.text !== 'Press me' || r.url !== previewURL ||
    r.source?.file !== 'src/App.jsx' || r.source?.line !== 12 || !r.bbox || !r.viewport) {
    throw new Error(`the reference is ${JSON.stringify(r)}`);
  }
  await pane.getByRole('button', { name: 'Pick an element' }).waitFor(); // pick mode ended
  await shot(page, 'preview');

  step('a typed port is remembered for its Session across a reload, and never carried into another');
  await pane.getByLabel('Port to preview').fill('8001');
  await pane.getByRole('button', { name: 'Open', exact: true }).click();
  await page.locator('iframe[title="Preview of port 8001"]').waitFor({ state: 'attached' });
  await page.reload();
  await page.locator('iframe[title="Preview of port 8001"]').waitFor({ state: 'attached' });

  step('the ports listening in the sandbox are offered as choices, with a Refresh');
  const listening = pane.getByRole('group', { name: 'Listening ports' });
  await pane.getByRole('button', { name: 'Refresh the listening ports' }).click();
  await listening.getByRole('button', { name: ':8000', exact: true }).waitFor();
  if (await listening.getByRole('button', { name: ':8001', exact: true }).count()) throw new Error('port 8001 is offered, but nothing listens on it');
  await listening.getByRole('button', { name: ':8000', exact: true }).click();
  await page.locator('iframe[title="Preview of port 8000"]').waitFor({ state: 'attached' });
  await expectText(pane.getByRole('group', { name: 'Listening ports' }).locator('[aria-pressed="true"]'), ':8000');

  step('a folder that is not a Git repository is a clear empty state');
  const plain = await newSession(plainDir, 'plain');
  await page.goto(`${base}/#/sessions/${plain}/preview`);
  await expectText(page.getByRole('complementary', { name: 'Preview' }), 'No port to show');
  await page.goto(`${base}/#/sessions/${plain}/git`);
  await expectText(page.locator('.session-head .env-badge'), 'Ready', READY);
  const empty = page.getByRole('complementary', { name: 'Source Control' }).getByRole('status');
  await expectText(empty, 'Not a Git repository');
  await expectText(empty, plainDir);
}

await drive(browsing, run, async () => {
  for (const id of sessionIds) {
    await call('DELETE', `/api/sessions/${id}?force=true`).catch((err) => {
      console.log(`FAIL deleting the Session: ${err.message}`);
      process.exitCode = 1;
    });
  }
});
