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
 * expected(response) does not accept are recorded in problems, on that
 * page and on every page newPage opens after it (another tab of the same
 * browser profile, for the flows that need two).
 */
export async function launch({ viewport, expected }) {
  const browser = await chromium.launch({
    executablePath: process.env.LATHE_CHROMIUM || '/usr/bin/chromium',
    args: ['--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-gpu', '--disable-quic'],
  });
  const context = await browser.newContext({ viewport, colorScheme: 'light', reducedMotion: 'reduce' });
  const problems = [];
  const newPage = async (label = '') => {
    const p = await context.newPage();
    watch(p, problems, expected, label);
    return p;
  };
  const page = await newPage();
  return { browser, context, page, problems, newPage };
}

/**
 * unprepared accepts the refusals a daemon without sandboxes makes on
 * purpose: the model list of a test machine without a model server, and the
 * reads a never-prepared Session's suspended tools make.
 */
export const unprepared = (r) => {
  const u = new URL(r.url());
  return (r.status() === 502 && u.pathname === '/api/llm/models') ||
    (r.status() === 409 && r.request().method() === 'GET' && /^\/api\/sessions\/[^/]+\/(git\/status|git\/branches|tree|tasks)$/.test(u.pathname));
};

/** watch records page's errors and unexpected HTTP refusals in problems, each prefixed with label. */
export function watch(page, problems, expected, label = '') {
  const pre = label ? `${label}: ` : '';
  page.on('pageerror', (e) => problems.push(`${pre}page error: ${e.message}`));
  page.on('console', (m) => {
    // A failed fetch is logged by Chromium too; the response handler judges those.
    if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`${pre}console error: ${m.text()}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400 && !expected(r)) problems.push(`${pre}HTTP ${r.status()} for ${r.request().method()} ${r.url()}`);
  });
}

/** expectText waits until locator's text contains want. */
export async function expectText(locator, want, timeout = 15_000) {
  await locator.filter({ hasText: want }).first().waitFor({ timeout });
}

/** expectValue waits until a form control's value is want. */
export async function expectValue(locator, want, timeout = 15_000) {
  const el = await locator.elementHandle({ timeout });
  await locator.page().waitForFunction(([e, w]) => e.value === w, [el, want], { timeout })
    .catch(async () => { throw new Error(`the value is ${JSON.stringify(await el.evaluate((e) => e.value))}, want ${JSON.stringify(want)}`); });
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

/** screenshots is where `make screenshots` wants the README's screenshots (LATHE_SCREENSHOTS), or ''. */
export const screenshots = process.env.LATHE_SCREENSHOTS || '';

/**
 * shot saves a screenshot of the page as name.png in the artifacts, and
 * under LATHE_SCREENSHOTS when it is set (the README's screens).
 */
export async function shot(page, name) {
  // Without the toasts of the steps before, and after a rendered frame.
  await page.evaluate(() => new Promise((resolve) => {
    if (globalThis.lathe) {
      lathe.ui.toasts = [];
      lathe.update();
    }
    document.fonts.ready.then(() => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  }));
  const buf = await page.screenshot({ path: path.join(artifacts, `${name}.png`) });
  if (screenshots) {
    const fs = await import('node:fs/promises');
    await fs.mkdir(screenshots, { recursive: true });
    await fs.writeFile(path.join(screenshots, `${name}.png`), buf);
  }
}

/**
 * layoutProblems lists what is wrong with the layout at the page's
 * current size: an element that reaches outside the viewport (unless a
 * scrolling or clipping ancestor holds it), a document wider than the
 * window, and two visible panes (rail, conversation, inspector, dock,
 * pane switcher) whose boxes overlap. The off-canvas rail is hidden, so it
 * does not count.
 */
export async function layoutProblems(page) {
  return page.evaluate(() => {
    const out = [];
    const vw = document.documentElement.clientWidth;
    const vh = window.innerHeight;
    if (document.documentElement.scrollWidth > vw + 1) out.push(`the document scrolls sideways: ${document.documentElement.scrollWidth} > ${vw}`);
    const clipped = (el) => {
      for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
        const cs = getComputedStyle(p);
        if (cs.overflowX !== 'visible' || cs.position === 'fixed') return true;
      }
      return false;
    };
    const name = (el) => `${el.tagName.toLowerCase()}${el.id ? `#${el.id}` : ''}${el.className && typeof el.className === 'string' ? `.${el.className.trim().split(/\s+/).join('.')}` : ''}`;
    for (const el of document.querySelectorAll('body *')) {
      if (el.closest('.xterm, .cm-editor, dialog:not([open]), [hidden], .skip, .sr-only')) continue; // the skip link waits off-screen on purpose
      const cs = getComputedStyle(el);
      if (cs.visibility === 'hidden' || cs.display === 'none' || cs.position === 'fixed') continue;
      const r = el.getBoundingClientRect();
      if (!r.width || !r.height) continue;
      if ((r.right > vw + 1 || r.left < -1) && !clipped(el)) out.push(`${name(el)} reaches outside the viewport (${Math.round(r.left)}–${Math.round(r.right)} of ${vw})`);
      if (out.length > 10) break;
    }
    const panes = [...document.querySelectorAll('.shell > .rail, .shell > .main, .shell > .inspector, .shell > .dock, .shell > .pane-switcher')]
      .filter((el) => { const cs = getComputedStyle(el); return cs.display !== 'none' && cs.visibility !== 'hidden'; })
      .map((el) => ({ el: name(el).split('.').slice(0, 2).join('.'), r: el.getBoundingClientRect() }))
      .filter((p) => p.r.width > 0 && p.r.height > 0);
    for (let i = 0; i < panes.length; i++) {
      for (let j = i + 1; j < panes.length; j++) {
        const a = panes[i].r;
        const b = panes[j].r;
        const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
        const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 && h > 1) out.push(`${panes[i].el} and ${panes[j].el} overlap by ${Math.round(w)}×${Math.round(h)}`);
      }
      const r = panes[i].r;
      if (r.right > vw + 1 || r.bottom > vh + 1) out.push(`${panes[i].el} reaches outside the window`);
    }
    return out;
  });
}

/** expectLayout fails with layoutProblems, if any, naming the width. */
export async function expectLayout(page, label) {
  const p = await layoutProblems(page);
  if (p.length) throw new Error(`layout at ${label}: ${p.join('; ')}`);
}

/** paneBox is the bounding box of a pane (a CSS selector), or null when it does not show. */
export async function paneBox(page, sel) {
  return page.evaluate((s) => {
    const el = document.querySelector(s);
    if (!el) return null;
    const cs = getComputedStyle(el);
    if (cs.display === 'none' || cs.visibility === 'hidden') return null;
    const r = el.getBoundingClientRect();
    return { x: r.x, y: r.y, width: r.width, height: r.height };
  }, sel);
}

/** newTerminal opens a terminal in the dock, waits until it is live and focused, and returns its xterm. */
export async function newTerminal(page) {
  await page.getByRole('button', { name: '+ Terminal' }).click();
  const term = page.locator('.term:not([hidden]) .xterm');
  await term.waitFor();
  await expectText(page.getByRole('tab', { selected: true }), 'live');
  await term.click();
  return term;
}
