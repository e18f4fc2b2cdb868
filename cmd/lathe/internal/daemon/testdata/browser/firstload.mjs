// The workbench's first load with LATHE_SESSIONS Sessions (issue 26's
// performance figures), driven by firstload_browser_test.go: first
// contentful paint, the first render of the rail's Sessions (the
// lathe-interactive mark: the first render of the hydrated state), and the
// first load's bytes on the wire beside the same bytes uncompressed. A
// warm-up load fills the module cache first, as a returning user has it;
// the figures are of a cold load (cache disabled) and of a warm one.
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
    const list = res.find((r) => new URL(r.name).pathname === '/api/sessions');
    return {
      fcp: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? -1,
      rail: performance.getEntriesByName('lathe-interactive')[0].startTime,
      wire: all.reduce((n, r) => n + (r.transferSize || 0), 0),
      body: all.reduce((n, r) => n + (r.encodedBodySize || 0), 0),
      plain: all.reduce((n, r) => n + (r.decodedBodySize || 0), 0),
      listWire: list?.encodedBodySize ?? -1,
      listPlain: list?.decodedBodySize ?? -1,
      // Where the time goes: the modules run, the snapshot, the records.
      start: performance.getEntriesByName('lathe-start')[0]?.startTime ?? -1,
      snapshot: performance.getEntriesByName('lathe-snapshot')[0]?.startTime ?? -1,
      listStart: list?.requestStart ?? -1,
      listEnd: list?.responseEnd ?? -1,
      records: performance.getEntriesByName('lathe-records')[0]?.startTime ?? -1,
    };
  });
  metric(`${label}_first_contentful_paint`, f.fcp, 'ms');
  metric(`${label}_rail_sessions_visible`, f.rail, 'ms');
  for (const k of ['start', 'snapshot', 'listStart', 'listEnd', 'records']) metric(`${label}_at_${k}`, f[k], 'ms');
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
}

await drive(browsing, run);
