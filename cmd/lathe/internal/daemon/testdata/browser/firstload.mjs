// The workbench's first load with LATHE_SESSIONS Sessions (issue 26's
// performance figures), driven by firstload_browser_test.go: first
// contentful paint, the first render of the rail's Sessions (the lathe-rail
// mark: the first page of the Session list shown), the first render of the
// whole hydrated state (lathe-interactive: every page and the tools), and
// the first load's bytes on the wire beside the same bytes uncompressed.
// The figures are of a cold load (cache disabled) and of a warm one (the
// module cache filled, as a returning user has it). The rail is virtual:
// it holds one screen of rows, and scrolling brings the last one.
//
// Environment:
//   LATHE_URL       the daemon's base URL
//   LATHE_SESSIONS  how many Sessions the daemon holds

import { drive, launch, metric, step } from './harness.mjs';

const base = process.env.LATHE_URL;
const want = Number(process.env.LATHE_SESSIONS);
const browsing = await launch({ viewport: { width: 1440, height: 900 }, expected: (r) => r.status() === 502 && new URL(r.url()).pathname === '/api/llm/models' });
const { page } = browsing;

/** load opens the workbench and reports its figures under label. */
async function load(label) {
  await page.goto(`${base}/`);
  await page.waitForFunction(() => performance.getEntriesByName('lathe-interactive').length > 0, null, { timeout: 60_000 });
  await page.waitForFunction((n) => lathe.state.sessions.size === n, want, { timeout: 60_000 });
  await page.waitForFunction(() => document.querySelector('.rail .session-item'));
  const f = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0];
    const res = performance.getEntriesByType('resource');
    const all = [nav, ...res];
    const pages = res.filter((r) => new URL(r.name).pathname === '/api/sessions');
    const mark = (name) => performance.getEntriesByName(name)[0]?.startTime ?? -1;
    return {
      fcp: mark('first-contentful-paint'),
      rail: mark('lathe-rail'),
      interactive: mark('lathe-interactive'),
      wire: all.reduce((n, r) => n + (r.transferSize || 0), 0),
      body: all.reduce((n, r) => n + (r.encodedBodySize || 0), 0),
      plain: all.reduce((n, r) => n + (r.decodedBodySize || 0), 0),
      pages: pages.length,
      listWire: pages.reduce((n, r) => n + r.encodedBodySize, 0),
      listPlain: pages.reduce((n, r) => n + r.decodedBodySize, 0),
      firstPlain: pages[0]?.decodedBodySize ?? -1,
      // Where the time goes: the first modules run, the snapshot, the first page.
      start: mark('lathe-start'),
      snapshot: mark('lathe-snapshot'),
      listStart: pages[0]?.requestStart ?? -1,
      listEnd: pages[0]?.responseEnd ?? -1,
      records: mark('lathe-records'),
      rows: document.querySelectorAll('.rail .session-item').length,
    };
  });
  metric(`${label}_first_contentful_paint`, f.fcp, 'ms');
  metric(`${label}_rail_sessions_visible`, f.rail, 'ms');
  metric(`${label}_interactive`, f.interactive, 'ms');
  for (const k of ['start', 'snapshot', 'listStart', 'listEnd', 'records']) metric(`${label}_at_${k}`, f[k], 'ms');
  metric(`${label}_rail_rows_in_the_dom`, f.rows, 'rows');
  metric(`${label}_session_list_pages`, f.pages, 'requests');
  metric(`${label}_session_list_first_page_uncompressed`, f.firstPlain / 1024, 'KiB');
  if (f.rows > 100) throw new Error(`the rail holds ${f.rows} Session rows in its DOM: it is not virtual`);
  if (f.rail < 0 || f.rail > f.interactive) throw new Error(`the rail's Sessions showed at ${f.rail} ms, after the whole state (${f.interactive} ms)`);
  metric(`${label}_transferred`, f.wire / 1024, 'KiB');
  metric(`${label}_bodies_on_the_wire`, f.body / 1024, 'KiB');
  metric(`${label}_bodies_uncompressed`, f.plain / 1024, 'KiB');
  metric(`${label}_session_list_on_the_wire`, f.listWire / 1024, 'KiB');
  metric(`${label}_session_list_uncompressed`, f.listPlain / 1024, 'KiB');
  return f;
}

async function run() {
  step(`a first load with ${want} Sessions, cold (no cache)`);
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: true });
  const cold = await load('cold');
  if (cold.listWire >= cold.listPlain) throw new Error(`the Session list went uncompressed: ${cold.listWire} bytes`);
  if (cold.wire > 400 * 1024) throw new Error(`the cold first load is ${Math.round(cold.wire / 1024)} KiB on the wire, over 400 KiB`);
  step('and warm (the module cache filled, as a returning user has it)');
  await cdp.send('Network.setCacheDisabled', { cacheDisabled: false });
  await load('warm');

  step('the virtual rail scrolls to its last Session, and its rows stay one screen');
  const rail = page.locator('.rail-body');
  const last = page.getByRole('link', { name: /^fix the flaky test number 199 of repo 4,/ });
  if (await last.count()) throw new Error('the last Session is in the DOM before the rail scrolled to it');
  await rail.evaluate((el) => { el.scrollTop = el.scrollHeight; });
  await last.waitFor({ timeout: 10_000 });
  const rows = await page.locator('.rail .session-item').count();
  if (rows > 100) throw new Error(`the scrolled rail holds ${rows} Session rows`);
  await last.click();
  await page.waitForFunction(() => lathe.ui.route.session && document.querySelector('.rail [aria-current="page"]'));

  step('a worktree Session shows a branch chip naming its branch; a shared one shows none');
  // The Session records as the daemon sends them once Sessions can have
  // their own worktree (isolation, branch), as event frames.
  const id = await page.evaluate(() => {
    const s = lathe.state.sessions.get(lathe.ui.route.session);
    lathe.live.onFrame({ kind: 'event', type: 'session-renamed', aggregate: 'session', aggregate_id: s.id, session: { ...s, isolation: 'worktree', branch: `lathe/${s.id}` } });
    return s.id;
  });
  const chip = page.locator('.rail [aria-current="page"] .branch-chip');
  await chip.waitFor({ timeout: 5_000 });
  if ((await chip.getAttribute('title')) !== `Its own worktree, on branch lathe/${id}`) throw new Error(`the chip's title is ${await chip.getAttribute('title')}`);
  const label = await page.locator('.rail [aria-current="page"]').getAttribute('aria-label');
  if (!label.includes(`on branch lathe/${id}`)) throw new Error(`the Session's label does not name its branch: ${label}`);
  await page.evaluate((sid) => {
    const s = lathe.state.sessions.get(sid);
    lathe.live.onFrame({ kind: 'event', type: 'session-renamed', aggregate: 'session', aggregate_id: sid, session: { ...s, isolation: 'shared', branch: '' } });
  }, id);
  await chip.waitFor({ state: 'detached', timeout: 5_000 });
  if (await page.locator('.rail .branch-chip').count()) throw new Error('a shared Session shows a branch chip');

  step('Alt-↓ from the last Session moves to the first, and the rail scrolls back to show it');
  await page.keyboard.press('Alt+ArrowDown');
  const first = page.getByRole('link', { name: /^fix the flaky test number 0 of repo 0,/ });
  await first.waitFor({ timeout: 10_000 });
  if ((await first.getAttribute('aria-current')) !== 'page') throw new Error('the first Session is not the current one');
  const where = () => first.evaluate((a) => {
    const r = a.getBoundingClientRect();
    const b = a.closest('.rail-body').getBoundingClientRect();
    return { inView: r.top >= b.top - 1 && r.bottom <= b.bottom + 1, row: [r.top, r.bottom], view: [b.top, b.bottom] }; // to a pixel
  });
  const w = await where();
  if (!w.inView) throw new Error(`the current Session is outside the rail's view: ${JSON.stringify(w)}`);
}

await drive(browsing, run);
