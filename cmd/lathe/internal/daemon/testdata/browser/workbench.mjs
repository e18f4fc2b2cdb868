// The workbench in a real headless Chromium against a real daemon (with real
// sandboxes), driven by workbench_test.go. No sleeps: every wait is
// Playwright's auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL (http://127.0.0.1:PORT)
//   LATHE_KEY        an API key: the browser signs in with /?token=
//   LATHE_WORKSPACE  a folder to register; it holds src/app.py
//   LATHE_ARTIFACTS  where a failure's screenshot goes
//
// Prints "METRIC <name> <value> <unit>" lines; exits 1 on the first failure.

import fs from 'node:fs/promises';
import path from 'node:path';
import { artifacts, drive, expectLayout, expectText, launch, metric, newTerminal, shot, step } from './harness.mjs';

const base = process.env.LATHE_URL;
const key = process.env.LATHE_KEY;
const wsDir = process.env.LATHE_WORKSPACE;
const READY = 90_000; // a sandbox start on a loaded 2-core machine

// Refusals the flows cause on purpose: the turns route a daemon may not
// have yet, the model list without a model server, the conflicting save,
// the re-read of a Session whose settlement was its deletion, and the
// editor's re-check of a file the flow deleted.
const expected = (r) => {
  const { pathname } = new URL(r.url());
  const m = r.request().method();
  return (r.status() === 404 && m === 'GET' && /^\/api\/sessions\/[^/]+(\/turns|\/attachments)?$/.test(pathname)) ||
    (r.status() === 502 && pathname === '/api/llm/models') || // no model server on a test machine
    (r.status() === 409 && m === 'POST' && /^\/api\/sessions\/[^/]+\/file$/.test(pathname)) ||
    // the editor's re-check of a file deleted meanwhile: it marks the tab gone (files.js check)
    (r.status() === 404 && m === 'GET' && /^\/api\/sessions\/[^/]+\/file$/.test(pathname)) ||
    (r.status() === 409 && m === 'POST' && /^\/api\/sessions\/[^/]+\/files\/create$/.test(pathname)) || // a new file where one exists
    (r.status() === 409 && m === 'GET' && /^\/api\/sessions\/[^/]+\/git\/status$/.test(pathname)); // the Files tree asks once: not a repository
};
const browsing = await launch({ viewport: { width: 1280, height: 800 }, expected });
const { page } = browsing;

/** interactive measures the navigation timing and the time to the first hydrated render. */
async function interactive(label) {
  await page.locator('[data-conn="live"]').waitFor();
  await page.waitForFunction(() => performance.getEntriesByName('lathe-interactive').length > 0);
  const t = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    return {
      dcl: nav.domContentLoadedEventEnd, load: nav.loadEventEnd,
      tti: performance.getEntriesByName('lathe-interactive')[0].startTime,
      bytes: performance.getEntriesByType('resource').reduce((n, r) => n + (r.encodedBodySize || 0), nav.encodedBodySize || 0),
    };
  });
  metric(`${label}_dom_content_loaded`, t.dcl, 'ms');
  metric(`${label}_time_to_interactive`, t.tti, 'ms');
  metric(`${label}_transferred`, t.bytes / 1024, 'KiB');
}

async function run() {
  const badge = page.locator('.session-head .env-badge');

  step('sign in with the link and load the empty workbench');
  await page.goto(`${base}/?token=${encodeURIComponent(key)}`);
  await page.getByRole('button', { name: 'Add a Workspace…' }).waitFor();
  await page.goto(`${base}/`); // a plain load, signed in by the cookie
  await interactive('cold');

  step('register a Workspace with the folder picker');
  await page.getByRole('button', { name: 'Add a Workspace…' }).click();
  const picker = page.getByRole('dialog', { name: 'Add a Workspace' });
  // It opens on the home folder with nothing chosen: a bare Enter registers nothing.
  await picker.getByRole('list', { name: /^Folders in / }).waitFor();
  await expectText(picker, 'No folder chosen yet');
  if (await picker.getByRole('button', { name: /^Register/ }).isEnabled()) throw new Error('the picker opens with a folder preselected for registration');
  let registered = 0;
  const count = (r) => { if (r.request().method() === 'POST' && new URL(r.url()).pathname === '/api/workspaces') registered++; };
  page.on('request', count);
  await picker.getByLabel(/^Name/).press('Enter');
  await expectText(picker, 'No folder chosen yet');
  if (registered) throw new Error('a bare Enter registered a folder');
  page.off('request', count);
  await picker.getByLabel('Folder', { exact: true }).fill(path.dirname(wsDir));
  await picker.getByLabel('Folder', { exact: true }).press('Enter');
  await picker.getByRole('button', { name: `${path.basename(wsDir)}/` }).click(); // into it, from its parent's listing
  await expectText(picker.getByRole('button', { name: /^Register/ }), path.basename(wsDir));
  await picker.getByRole('button', { name: /^Register/ }).click();

  step('create a Session whose setup command waits for approval');
  const create = page.getByRole('dialog', { name: 'New Session' });
  await create.getByLabel('Name', { exact: true }).fill('browser test');
  await create.getByLabel('Choose the image and setup command').check();
  const setup = 'echo setup-ran-$((6*7)) | tee /tmp/setup-marker';
  await create.getByLabel('Setup command', { exact: true }).fill(setup);
  await create.getByRole('button', { name: 'Create Session' }).click();
  await expectText(badge, 'Awaiting approval');
  await page.waitForURL(/#\/sessions\/[0-9A-Z]+/);
  const sessionId = decodeURIComponent(page.url().split('#/sessions/')[1].split('/')[0]);
  await expectText(page.getByRole('navigation', { name: 'Workspaces and Sessions' }).locator('a[aria-current="page"]'), 'browser test');

  step('approve the exact setup command in the review panel; the Session goes Ready');
  const review = page.getByRole('complementary', { name: 'Environment review' });
  const shown = await review.getByTestId('approval-command').textContent();
  if (shown !== setup) throw new Error(`the review shows ${JSON.stringify(shown)}, not the exact command ${JSON.stringify(setup)}`);
  await review.getByText('binds to exactly this text').waitFor();
  await shot(page, 'environment-review');
  await review.getByRole('button', { name: 'Approve and prepare' }).click();
  await expectText(badge, 'Ready', READY);
  await expectText(review.locator('.facts'), 'ran in this generation');
  await expectText(review.locator('.facts'), 'Approved');
  await expectText(review.locator('.env-reason'), 'prepared after you approved its setup command'); // a new generation, in the user's words
  if ((await review.textContent()).includes('plan changed')) throw new Error('the first approval reads as a changed plan');
  await expectText(review.getByLabel('Setup output'), 'setup-ran-42'); // the command's own output, not its text
  await page.screenshot({ path: path.join(artifacts, 'review.png') });

  step('open a file from the lazy tree, edit and save it');
  await page.getByRole('button', { name: 'Files', exact: true }).click();
  const filesPanel = page.getByRole('complementary', { name: 'Files' });
  await filesPanel.getByRole('button', { name: 'src/' }).click();
  await filesPanel.getByRole('button', { name: 'app.py' }).click();
  await page.waitForURL(/\/files\/src\/app\.py$/);
  const editor = filesPanel.locator('.cm-content');
  await expectText(editor, 'print("hello")');
  await editor.click();
  await page.keyboard.press('Control+End');
  await page.keyboard.type('\nprint("edited")');
  await expectText(filesPanel.locator('.editor-bar'), 'modified');
  await page.keyboard.press('Control+s');
  await page.getByText('Saved src/app.py').waitFor();
  await shot(page, 'files-editor');
  const saved = await fs.readFile(path.join(wsDir, 'src/app.py'), 'utf8');
  if (!saved.includes('print("edited")')) throw new Error(`the file on disk is ${JSON.stringify(saved)} after saving`);

  step('a file changed underneath is a conflict, not an overwrite');
  await page.keyboard.type('\nprint("mine")');
  await fs.writeFile(path.join(wsDir, 'src/app.py'), 'print("theirs")\n');
  await filesPanel.getByRole('button', { name: 'Save', exact: true }).click();
  await expectText(filesPanel.getByRole('alert'), 'changed on disk since you opened it');
  const after = await fs.readFile(path.join(wsDir, 'src/app.py'), 'utf8');
  if (after !== 'print("theirs")\n') throw new Error(`the conflicting save overwrote the file: ${JSON.stringify(after)}`);
  await filesPanel.getByRole('button', { name: /Reload from disk/ }).click();
  await expectText(editor, 'print("theirs")');

  step('several files in editor tabs: each keeps its unsaved edits; closing one with edits asks first');
  await filesPanel.getByRole('button', { name: 'README.md' }).click();
  await page.waitForURL(/\/files\/README\.md$/);
  const tabs = filesPanel.getByRole('tablist', { name: 'Open files' });
  await expectText(tabs.getByRole('tab', { selected: true }), 'README.md');
  await expectText(editor, '# demo');
  await editor.click();
  await page.keyboard.press('Control+End');
  await page.keyboard.type('draft line');
  await expectText(filesPanel.locator('.editor-bar'), 'modified');
  await tabs.getByRole('tab', { name: 'app.py' }).click();
  await expectText(editor, 'print("theirs")');
  if ((await editor.textContent()).includes('draft line')) throw new Error('the README draft leaked into app.py');
  await tabs.getByRole('tab', { name: /README\.md/ }).click();
  await expectText(editor, 'draft line'); // the edit waited in its tab
  await expectText(tabs.getByRole('tab', { name: /README\.md/ }), '●');
  await filesPanel.getByRole('button', { name: 'Close README.md' }).click();
  await page.getByRole('dialog', { name: 'Close README.md?' }).getByRole('button', { name: 'Cancel' }).click(); // discard the edits? no
  await expectText(editor, 'draft line');
  await filesPanel.getByRole('button', { name: 'Close README.md' }).click();
  await page.getByRole('dialog', { name: 'Close README.md?' }).getByRole('button', { name: 'Discard edits and close' }).click(); // yes
  await expectText(editor, 'print("theirs")');
  await page.waitForURL(/\/files\/src\/app\.py$/);
  if ((await fs.readFile(path.join(wsDir, 'README.md'), 'utf8')) !== '# demo\n') throw new Error('closing a tab wrote the file');

  step('the Files tree: new folder, new file, rename and delete, each re-reading the tree; a refusal in words');
  const fileActions = filesPanel.getByRole('toolbar', { name: 'File actions' });
  const treeNav = filesPanel.getByRole('navigation', { name: 'File tree' });
  const exists = (p) => fs.stat(path.join(wsDir, p)).then(() => true, () => false);
  await treeNav.getByRole('button', { name: 'README.md', exact: true }).click(); // a top-level entry: new ones go beside it
  await fileActions.getByRole('button', { name: 'New folder' }).click();
  let fileDialog = page.getByRole('dialog', { name: 'New folder' });
  await fileDialog.getByLabel('Path of the new folder').fill('notes');
  await fileDialog.getByRole('button', { name: 'Create folder' }).click();
  await treeNav.getByRole('button', { name: 'notes/', exact: true }).waitFor();
  if (!(await fs.stat(path.join(wsDir, 'notes'))).isDirectory()) throw new Error('New folder made no folder');
  await treeNav.getByRole('button', { name: 'notes/', exact: true }).click(); // selects it (and opens it): a new file goes in it
  await fileActions.getByRole('button', { name: 'New file' }).click();
  fileDialog = page.getByRole('dialog', { name: 'New file' });
  if ((await fileDialog.getByLabel('Path of the new file').inputValue()) !== 'notes/') throw new Error('a new file in the selected folder does not start there');
  await fileDialog.getByLabel('Path of the new file').fill('notes/todo.txt');
  await fileDialog.getByRole('button', { name: 'Create file' }).click();
  await page.waitForURL(/\/files\/notes\/todo\.txt$/); // a new file opens
  await treeNav.getByRole('button', { name: 'todo.txt', exact: true }).waitFor();
  if ((await fs.readFile(path.join(wsDir, 'notes/todo.txt'), 'utf8')) !== '') throw new Error('New file made no empty file');
  await fileActions.getByRole('button', { name: 'New file' }).click();
  await fileDialog.getByLabel('Path of the new file').fill('notes/todo.txt');
  await fileDialog.getByRole('button', { name: 'Create file' }).click();
  await expectText(fileDialog.getByRole('alert'), 'already exists'); // the daemon's refusal, in the dialog
  await fileDialog.getByRole('button', { name: 'Cancel' }).click();
  await treeNav.getByRole('button', { name: 'todo.txt', exact: true }).click();
  await fileActions.getByRole('button', { name: 'Rename…' }).click();
  fileDialog = page.getByRole('dialog', { name: 'Rename notes/todo.txt' });
  await fileDialog.getByLabel('New path').fill('notes/done.txt');
  await fileDialog.getByRole('button', { name: 'Rename', exact: true }).click();
  await treeNav.getByRole('button', { name: 'done.txt', exact: true }).waitFor();
  await treeNav.getByRole('button', { name: 'todo.txt', exact: true }).waitFor({ state: 'detached' });
  await page.waitForURL(/\/files\/notes\/done\.txt$/); // the open tab followed
  if (await exists('notes/todo.txt') || !(await exists('notes/done.txt'))) throw new Error('Rename did not move notes/todo.txt to notes/done.txt');
  await treeNav.getByRole('button', { name: 'notes/', exact: true }).click();
  await fileActions.getByRole('button', { name: 'Delete…' }).click();
  fileDialog = page.getByRole('dialog', { name: 'Delete notes?' });
  const delFolder = fileDialog.getByRole('button', { name: 'Delete', exact: true });
  if (!(await delFolder.isDisabled())) throw new Error('a folder with contents can be deleted without the recursive choice');
  await fileDialog.getByLabel('Delete everything inside it too').check();
  await delFolder.click();
  await treeNav.getByRole('button', { name: 'notes/', exact: true }).waitFor({ state: 'detached' });
  if (await exists('notes')) throw new Error('Delete left the folder');
  await page.waitForURL(/\/files\/README\.md$/); // the deleted file's tab closed; the last one left shows
  if (await filesPanel.getByRole('tab', { name: 'done.txt' }).count()) throw new Error('a deleted file keeps its tab');
  await filesPanel.getByRole('button', { name: 'Close README.md' }).click(); // back to src/app.py alone, for the steps after
  await page.waitForURL(/\/files\/src\/app\.py$/);
  await expectText(editor, 'print("theirs")');

  step('send a selection to the composer as a context reference');
  await editor.click();
  await page.keyboard.press('Control+a');
  await filesPanel.getByRole('button', { name: /^Reference lines 1–/ }).click();
  await expectText(page.getByRole('list', { name: 'References' }), 'src/app.py:1');

  step('the composer: Shift-Enter adds a line, Enter sends with the reference');
  const composer = page.getByLabel('Message to the Agent');
  await composer.click();
  await page.keyboard.type('first line');
  await page.keyboard.press('Shift+Enter');
  await page.keyboard.type('second line');
  await page.keyboard.press('Enter');
  const turn = page.getByRole('region', { name: 'Conversation' }).locator('.turn').last();
  await expectText(turn.locator('.user-turn .text'), 'first line\nsecond line');
  await expectText(turn.locator('.user-turn .chip'), 'src/app.py:1');
  if ((await composer.inputValue()) !== '') throw new Error('the composer kept its text after sending');

  step('attach a file to the next turn');
  await page.locator('#attach-input').setInputFiles({ name: 'notes.txt', mimeType: 'text/plain', buffer: Buffer.from('remember this') });
  await expectText(page.getByRole('list', { name: 'Attachments' }), 'notes.txt');

  step('open a terminal and run a command');
  const term = await newTerminal(page);
  await page.keyboard.type('echo hi-$((40+2))\n');
  await expectText(term.locator('.xterm-rows'), 'hi-42');
  await page.keyboard.type('echo made > made-in-terminal.txt\n');
  await filesPanel.getByRole('button', { name: 'made-in-terminal.txt' }).waitFor(); // the tree follows, no Refresh clicked
  await page.screenshot({ path: path.join(artifacts, 'workbench.png') });

  step('the terminal follows the dock size');
  const cols = () => lathe.dock.terms.get(lathe.dock.active).term.cols;
  const before = await page.evaluate(cols);
  await page.setViewportSize({ width: 1000, height: 700 });
  await page.waitForFunction((b) => lathe.dock.terms.get(lathe.dock.active).term.cols !== b, before);
  const size = await page.evaluate(() => { const t = lathe.dock.terms.get(lathe.dock.active).term; return `${t.rows} ${t.cols}`; });
  await page.keyboard.type('stty size\n');
  await expectText(term.locator('.xterm-rows'), size);
  await page.setViewportSize({ width: 1280, height: 800 });

  step('a background task runs and reports its exit');
  await page.getByRole('tab', { name: /^Tasks/ }).click();
  await page.getByLabel('Command to run in the background').fill('echo bg-$((1+1))');
  await page.getByRole('button', { name: 'Run', exact: true }).click();
  const task = page.locator('.task').filter({ hasText: 'echo bg-' }).first();
  await expectText(task, 'exit 0', READY);
  await task.locator('summary').click();
  await expectText(task.locator('pre'), 'bg-2');

  // A detached task needs a daemon restart under a running process; the
  // daemon's own tests make one (tasks_test.go). Here its answer is put
  // into the task list as the daemon gives it, to check what the dock
  // shows and what Kill sends.
  step('a detached task says so and offers Kill; it never reads "exited (code -1)"');
  const detachedReason = 'detached: the daemon restarted; the process may still be running in the sandbox, but its output and terminal no longer reach Lathe; kill it to end it';
  const detachedTask = {
    id: 'TDETACHED', command: 'sleep 600 # from before the restart', interactive: false, generation: 1, status: 'detached', exit_code: -1,
    error: detachedReason, started_at: new Date().toISOString(),
  };
  let killSent = null;
  const isTasks = (u) => /^\/api\/sessions\/[^/]+\/tasks$/.test(u.pathname);
  const isKill = (u) => u.pathname === `/api/sessions/${sessionId}/tasks/TDETACHED/kill`;
  const withDetached = async (route) => {
    if (route.request().method() !== 'GET') return route.continue();
    const res = await route.fetch();
    const tasks = await res.json();
    return route.fulfill({ response: res, json: killSent ? tasks : [...tasks, detachedTask] });
  };
  const kill = (route) => {
    killSent = { method: route.request().method(), type: route.request().headers()['content-type'] };
    return route.fulfill({ status: 200, json: { ...detachedTask, status: 'exited', error: 'killed' } });
  };
  await page.route(isTasks, withDetached);
  await page.route(isKill, kill);
  await page.evaluate(() => lathe.dock.refresh());
  const gone = page.locator('.task').filter({ hasText: 'from before the restart' });
  await expectText(gone.locator('.task-detached'), 'detached: the daemon restarted; the process may still be running');
  await expectText(gone.locator('.badge'), 'detached');
  if (/code -1|exit -1/.test(await gone.textContent())) throw new Error(`the detached task reads ${JSON.stringify(await gone.textContent())}`);
  await gone.getByRole('button', { name: 'Kill sleep 600 # from before the restart' }).click();
  await gone.waitFor({ state: 'detached' }); // the kill answered, and the list was re-read
  if (killSent?.method !== 'POST' || !String(killSent.type).startsWith('application/json')) throw new Error(`the kill was sent as ${JSON.stringify(killSent)}`);
  await page.unroute(isTasks, withDetached);
  await page.unroute(isKill, kill);
  await page.getByRole('tab', { name: /^bash 1/ }).click();

  step('reload: the deep link restores the Session, the file and the terminal scrollback');
  const t0 = Date.now();
  await page.reload();
  await interactive('reload');
  await expectText(badge, 'Ready');
  await expectText(page.locator('.session-title'), 'browser test');
  await expectText(filesPanel.locator('.cm-content'), 'print("theirs")');
  await expectText(page.locator('.term:not([hidden]) .xterm-rows'), 'hi-42');
  metric('reload_to_terminal_scrollback', Date.now() - t0, 'ms');

  step('a rename elsewhere reaches the rail live');
  const rename = (name) => fetch(`${base}/api/sessions/${sessionId}`, {
    method: 'PATCH', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify({ name }),
  });
  await rename('renamed live');
  await expectText(page.getByRole('navigation', { name: 'Workspaces and Sessions' }).locator('a[aria-current="page"]'), 'renamed live');

  step('a reconnect replaces state from its snapshot: what changed offline shows, nothing doubles');
  const turns = await page.locator('.turn').count();
  await page.evaluate(() => lathe.live.stop());
  await page.locator('[data-conn="offline"]').waitFor();
  await expectText(badge, 'unknown (offline)'); // not a green Ready while nothing is known
  await expectText(page.locator('[data-conn="offline"]'), 'Reconnecting…');
  await rename('renamed elsewhere');
  await page.evaluate(() => lathe.live.start());
  await page.locator('[data-conn="live"]').waitFor();
  await expectText(page.locator('.session-title'), 'renamed elsewhere');
  if ((await page.locator('.turn').count()) !== turns) throw new Error('the reconnect doubled the transcript');
  await expectText(page.getByRole('tab', { selected: true }), 'live');

  step('a rebuild suspends the runtime tools, then they come back');
  const trace = () => page.evaluate(() => lathe.runtimeTrace.splice(0).map((t) => t.usable));
  await trace();
  await page.getByRole('button', { name: 'Environment', exact: true }).click();
  await review.getByRole('button', { name: 'Rebuild' }).click();
  await expectText(review.locator('.env-reason'), 'preparation 3', READY);
  await expectText(badge, 'Ready', READY);
  await expectText(review.locator('.env-reason'), 'rebuilt because you asked for it');
  await expectText(review.getByLabel('Setup output'), 'setup-ran-42');
  await page.locator('.dock .banner').waitFor({ state: 'detached', timeout: READY }); // no longer suspended
  const seen = await trace();
  if (seen[0] !== false || seen.at(-1) !== true) throw new Error(`runtime tools during the rebuild: ${JSON.stringify(seen)}, want suspended then usable`);
  await expectText(page.locator('.dock [role="tab"]'), 'ended'); // the old generation's terminal is gone

  step('a failing setup command: the evidence in full, then a reviewed plan without it');
  await review.getByText('Change the plan…').click();
  await review.getByLabel('Setup command', { exact: true }).fill('echo boom-$((2*3)); exit 3');
  await review.getByRole('checkbox', { name: /Run this exact setup command/ }).check();
  await review.getByRole('button', { name: 'Apply and prepare' }).click();
  await expectText(badge, 'Failed', READY);
  const evidence = review.getByRole('alert').filter({ hasText: 'The environment failed' });
  await expectText(evidence, 'Exit code 3');
  await expectText(evidence.locator('pre.output'), 'boom-6');
  await page.screenshot({ path: path.join(artifacts, 'failed.png') });
  if (await page.getByRole('button', { name: '+ Terminal' }).isEnabled()) throw new Error('a terminal can start in a failed environment');
  const setupBox = review.getByLabel('Setup command', { exact: true });
  if (!(await setupBox.isVisible())) await review.getByText('Change the plan…').click();
  await setupBox.fill('');
  await review.getByRole('button', { name: 'Apply and prepare' }).click();
  await expectText(badge, 'Ready', READY);
  await expectText(review.locator('.facts'), 'none');
  await expectText(review.locator('.env-reason'), 'prepared again after its plan changed');
  await review.getByLabel('Setup output').waitFor({ state: 'detached' }); // no setup ran in this generation

  step('the command palette switches and acts');
  await page.keyboard.press('Control+k');
  const palette = page.getByRole('dialog', { name: 'Command palette' });
  await palette.getByRole('combobox').fill('toggle the terminal');
  await palette.getByRole('combobox').press('Enter');
  await page.locator('#dock-panel').waitFor({ state: 'hidden' });

  step('accessible names, dark theme, the rail collapsed to icons and a narrow window');
  const unnamed = await page.evaluate(() => [...document.querySelectorAll('button, input, select, textarea, [role="tab"]')]
    .filter((el) => el.offsetParent !== null && !el.closest('.xterm, .cm-editor'))
    .filter((el) => !(el.getAttribute('aria-label') || el.labels?.length || el.closest('label') || (el.textContent || '').trim() || el.getAttribute('aria-labelledby')))
    .map((el) => el.outerHTML.slice(0, 120)));
  if (unnamed.length) throw new Error(`controls without an accessible name: ${unnamed.join(', ')}`);
  await page.emulateMedia({ colorScheme: 'dark' });
  const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  if (bg !== 'rgb(21, 23, 26)') throw new Error(`dark theme background is ${bg}`);
  await page.setViewportSize({ width: 1000, height: 800 });
  await page.getByRole('link', { name: 'renamed elsewhere, Ready' }).waitFor(); // an icon named by its label
  await page.screenshot({ path: path.join(artifacts, 'collapsed.png') });
  await page.setViewportSize({ width: 600, height: 800 });
  await page.getByRole('button', { name: 'Open the rail' }).click();
  await page.getByRole('navigation', { name: 'Workspaces and Sessions' }).getByRole('link', { name: /renamed elsewhere/ }).waitFor();
  await shot(page, 'narrow-dark-rail');
  await page.locator('.rail-scrim').click();
  await page.setViewportSize({ width: 1280, height: 800 });

  step('layout at every width, with the terminal and Files open: nothing overflows, no panes overlap');
  await page.getByRole('button', { name: 'Files', exact: true }).click();
  await page.keyboard.press('Control+k');
  await palette.getByRole('combobox').fill('toggle the terminal');
  await palette.getByRole('combobox').press('Enter');
  await page.locator('#dock-panel').waitFor();
  for (const [width, height] of [[1280, 800], [1024, 768], [800, 800], [390, 844]]) {
    await page.setViewportSize({ width, height });
    await expectLayout(page, `${width} px`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.emulateMedia({ colorScheme: 'light' });

  step('close, reopen and delete, each with a confirmation');
  const actions = page.getByRole('button', { name: 'Session actions' });
  await actions.click();
  await page.getByRole('dialog', { name: 'Session renamed elsewhere' }).getByRole('button', { name: 'Close…' }).click();
  await page.getByRole('dialog', { name: 'Close this Session?' }).getByRole('button', { name: 'Close Session' }).click();
  await expectText(badge, 'Closed', READY);
  await page.getByRole('button', { name: 'Reopen' }).click();
  await expectText(badge, 'Ready', READY);
  await actions.click();
  await page.getByRole('dialog', { name: 'Session renamed elsewhere' }).getByRole('button', { name: 'Delete…' }).click();
  const del = page.getByRole('dialog', { name: 'Delete this Session?' });
  await expectText(del, 'renamed elsewhere');
  await del.getByRole('button', { name: 'Delete Session' }).click();
  await page.getByRole('navigation', { name: 'Workspaces and Sessions' }).getByRole('link', { name: /renamed elsewhere/ }).waitFor({ state: 'detached' });
}

await drive(browsing, run);
