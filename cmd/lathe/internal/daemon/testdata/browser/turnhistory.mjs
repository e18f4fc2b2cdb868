// A turn's replay and changes in the History view, in a real headless
// Chromium against a real daemon, sandbox and git, driven by
// history_browser_test.go (TestTurnHistoryInChromium). No sleeps: every
// wait is Playwright's auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL (no API key: auth is off)
//   LATHE_SESSION    a Ready Session whose turn "edit" added added.txt and
//                    changed tracked.txt, which the operator edited since
//   LATHE_ARTIFACTS  where a failure's screenshot goes

import { launch, drive, step, shot, expectText } from './harness.mjs';

const base = process.env.LATHE_URL;
const sessionId = process.env.LATHE_SESSION;

// The restore over an edited file is refused on purpose, once.
const expected = (r) => r.status() === 409 && r.request().method() === 'POST' && new URL(r.url()).pathname.endsWith('/restore');
const browsing = await launch({ viewport: { width: 1280, height: 800 }, expected });
const { page } = browsing;

async function run() {
  step('open the History');
  await page.goto(`${base}/#/sessions/${encodeURIComponent(sessionId)}/history`);
  await page.locator('[data-conn="live"]').waitFor();
  const trail = page.getByRole('list', { name: 'Audit trail' });
  await expectText(trail, 'called `write_file`');
  await expectText(trail.locator('.actor'), 'Agent · coder');

  step('replay the turn at 10×');
  await trail.locator('.group-head', { hasText: '“edit the files”' }).first().getByRole('button', { name: 'Replay' }).click();
  const replay = page.getByRole('region', { name: 'Replay of the turn' });
  await replay.getByRole('button', { name: '10×' }).click();
  await expectText(replay, 'Editing.', 20_000);
  await expectText(replay.locator('.tool-card'), 'write_file');
  await expectText(replay.locator('.replay-end'), 'Done', 20_000);
  await expectText(replay, 'edited both files');
  await shot(page, 'history-replay');

  step('the turn changes, with a diff');
  await trail.locator('.group-head', { hasText: '“edit the files”' }).first().getByRole('button', { name: 'Changes' }).click();
  const changes = page.getByRole('region', { name: 'Changes of the turn' });
  await expectText(changes.locator('.turn-files'), 'added.txt');
  await expectText(changes.locator('.turn-files'), 'tracked.txt');
  await changes.getByRole('button', { name: 'tracked.txt' }).click();
  await expectText(changes.getByLabel('Diff of tracked.txt'), '+uno');

  step('a restore over a file edited since is refused, naming it');
  await changes.getByRole('checkbox').first().uncheck(); // added.txt stays
  await changes.getByRole('button', { name: 'Restore…' }).click();
  const confirm = changes.getByRole('alertdialog', { name: 'Confirm the restore' });
  await expectText(confirm, 'Write tracked.txt back as they were before this turn');
  await confirm.getByRole('button', { name: 'Restore' }).click();
  await expectText(changes.getByRole('alert'), 'These files changed after the turn');
  await expectText(changes.getByRole('alert'), 'tracked.txt');

  step('restoring anyway, confirmed, writes it');
  await changes.getByRole('button', { name: 'Restore anyway…' }).click();
  await expectText(confirm, 'Your later changes to those files are overwritten');
  await confirm.getByRole('button', { name: 'Restore' }).click();
  await expectText(page.getByRole('list', { name: 'Audit trail' }), 'restored `tracked.txt` from the before side');
}

await drive(browsing, run);
