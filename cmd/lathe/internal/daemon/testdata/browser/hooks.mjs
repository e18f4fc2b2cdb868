// A tool call a PreToolUse hook blocked, as the workbench shows it
// (hooks_browser_test.go): its card says "blocked by hook" with the
// hook's reason, opened; a turn a hook ended (continue: false) is
// "Stopped" with the hook's reason.
//
// Environment:
//   LATHE_URL       the daemon's base URL (no API key: auth is off)
//   LATHE_SESSION   a Session whose turn "guarded" a hook blocked
//   LATHE_ARTIFACTS where a failure's screenshot goes

import { launch, drive, expectText, step } from './harness.mjs';

const base = process.env.LATHE_URL;
const sessionId = process.env.LATHE_SESSION;
const b = await launch({ viewport: { width: 1280, height: 800 }, expected: (r) => r.status() === 409 && r.url().includes('/git/') }); // not a Git Workspace

await drive(b, async () => {
  step('blocked card');
  await b.page.goto(`${base}/#/sessions/${encodeURIComponent(sessionId)}`);
  const card = b.page.locator('li.turn[data-turn="guarded"] .tool-card.tk-shell');
  await expectText(card.locator('.tool-state'), 'blocked by hook');
  await expectText(card.locator('.tool-blocked'), 'blocked by hook `no-rm`: rm -rf is not allowed here');
  if (!(await card.evaluate((el) => el.open))) throw new Error('the blocked card is not open');

  step('stopped turn');
  const halted = b.page.locator('li.turn[data-turn="halted"]');
  await expectText(halted.locator('.turn-status'), 'Stopped');
  await expectText(halted, 'Stopped by hook `halt`: deploys wait for a human');
});
