// A retained remote runtime in a real headless Chromium, driven by
// remote_browser_test.go (TestRemoteRetainedInChromium): the engine's relay
// is cut before the script starts, so closing the Session retains its
// runtime; the banner says what to delete by hand, the script deletes it
// on the real engine and confirms. No sleeps.
//
// Environment:
//   LATHE_URL      the daemon's base URL (no API key: auth is off)
//   LATHE_SESSION  a Ready remote Session whose engine can no longer be reached
//   LATHE_RELAY    the engine host the daemon is configured with (cut)
//   LATHE_RUNTIME  the Session's container ID; LATHE_TOKEN its creation token
//   LATHE_DOCKER   the real engine, where the script deletes the container
//   LATHE_ARTIFACTS  where a failure's screenshot goes

import { execFileSync } from 'node:child_process';
import { drive, expectLayout, expectText, launch, shot, step } from './harness.mjs';

const base = process.env.LATHE_URL;
const id = process.env.LATHE_SESSION;
const relay = process.env.LATHE_RELAY;
const runtime = process.env.LATHE_RUNTIME;
const token = process.env.LATHE_TOKEN;
const CLOSE = 90_000; // the bring-home and removal give up on an engine that is gone

// Refusals a test machine gives (no model server), and the Session's reads
// while its engine cannot be reached (503) or after its container was
// deleted by hand (409: the sandbox is gone).
const expected = (r) => {
  const u = new URL(r.url());
  return (r.status() === 502 && u.pathname === '/api/llm/models') ||
    ((r.status() === 503 || r.status() === 409) && r.request().method() === 'GET' && /^\/api\/sessions\/[^/]+\/./.test(u.pathname));
};
const browsing = await launch({ viewport: { width: 1400, height: 900 }, expected });
const { page } = browsing;

async function run() {
  step('the close confirmation says the work goes home first');
  await page.goto(`${base}/#/sessions/${encodeURIComponent(id)}`);
  await page.getByRole('button', { name: 'Session actions' }).click();
  await page.getByRole('dialog', { name: /^Session / }).getByRole('button', { name: 'Close…' }).click();
  const close = page.getByRole('dialog', { name: 'Close this Session?' });
  await expectText(close.locator('.remote-home'), `brought home to branch lathe/${id}`);
  await close.getByRole('button', { name: 'Close Session' }).click();

  step('the engine cannot be reached: the banner names the host, the runtime, the token and the command');
  const banner = page.getByRole('alert', { name: 'A runtime was left on the engine' });
  await expectText(banner, 'could not be reached', CLOSE);
  await expectText(banner, relay);
  await expectText(banner.locator('.retained-id'), runtime);
  await expectText(banner.locator('.retained-token'), token);
  await expectText(banner.locator('.retained-cmd'), `docker -H ${relay} rm -f ${runtime}`);
  await shot(page, 'remote-retained');
  await expectLayout(page, '1400 px with the retained-runtime banner');

  step('deleted by hand on the engine, then confirmed: the banner goes');
  execFileSync('docker', ['-H', process.env.LATHE_DOCKER, 'rm', '-f', runtime]);
  await banner.getByRole('button', { name: `I deleted container ${runtime.slice(0, 8)}` }).click();
  await banner.waitFor({ state: 'detached' });
  await page.getByText('The retained runtime is cleared.').waitFor();
}

await drive(browsing, run);
