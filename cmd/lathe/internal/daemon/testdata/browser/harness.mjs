// What the browser scripts share: Chromium launched headless through
// playwright-core, a page whose errors and unexpected HTTP refusals are
// collected as problems, text expectations, and the PASS/FAIL protocol
// runBrowser (workbench_test.go) reads.

import { chromium } from 'playwright-core';
import path from 'node:path';

export const artifacts = process.env.LATHE_ARTIFACTS || '.';

export const metric = (name, value, unit) => console.log(`METRIC ${name} ${typeof value === 'number' ? value.toFixed(1) : value} ${unit}`);
export const step = (name) => console.log(`STEP ${name}`);

/**
 * launch starts Chromium with one page. A page error, a console error
 * other than a failed load, and an HTTP status of 400 or more that
 * expected(response) does not accept are recorded in problems.
 */
export async function launch({ viewport, expected }) {
  const browser = await chromium.launch({
    executablePath: process.env.LATHE_CHROMIUM || '/usr/bin/chromium',
    args: ['--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-gpu', '--disable-quic'],
  });
  const context = await browser.newContext({ viewport, colorScheme: 'light', reducedMotion: 'reduce' });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    // A failed fetch is logged by Chromium too; the response handler judges those.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console error: ${m.text()}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400 && !expected(r)) problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`);
  });
  return { browser, context, page, problems };
}

/** expectText waits until locator's text contains want. */
export async function expectText(locator, want, timeout = 15_000) {
  await locator.filter({ hasText: want }).first().waitFor({ timeout });
}

/**
 * drive runs the flows, then fails on any recorded problem; it prints PASS,
 * or FAIL with a screenshot, and closes the browser, then runs after.
 */
export async function drive({ browser, page, problems }, run, after = async () => {}) {
  try {
    await run();
    if (problems.length) throw new Error(problems.join('\n'));
    console.log('PASS');
  } catch (err) {
    console.log(`FAIL ${err.stack || err}`);
    for (const p of problems) console.log(p);
    await page.screenshot({ path: path.join(artifacts, 'failure.png') }).catch(() => {});
    process.exitCode = 1;
  } finally {
    await browser.close();
    await after();
  }
}
