// What every browser script shares: how a run ends. finish runs the
// script's flows and prints PASS, or FAIL with the error and the problems
// collected on the way, leaving a screenshot in artifacts; it always
// closes the browser.

import path from 'node:path';

export async function finish(run, { browser, page, problems, artifacts }) {
  try {
    await run();
    console.log('PASS');
  } catch (err) {
    console.log(`FAIL ${err.stack || err}`);
    for (const p of problems) console.log(p);
    await page.screenshot({ path: path.join(artifacts, 'failure.png') }).catch(() => {});
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}
