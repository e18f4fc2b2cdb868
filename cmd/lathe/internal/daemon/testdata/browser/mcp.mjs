// MCP in the workbench, in a real headless Chromium against a real daemon
// whose Agent calls a tool of a real MCP server (lathe-mcptest, configured
// as server "t"), driven by mcp_browser_test.go. No sleeps: every wait is
// Playwright's auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL (no API key: auth is off)
//   LATHE_SESSION    a Ready Session of the Agent "coder"
//   LATHE_ARTIFACTS  where a failure's screenshot goes
//
// Flows: a turn parks on an MCP call; the prompt shows in two tabs, and
// again after a reload (from the snapshot); an Allow
// (remembered for this tool and Agent) in one closes both and the turn goes
// on to its answer; a decision on an approval no longer pending says so; the
// MCP panel lists the server, its tools and the saved decision; a catalog
// entry whose command is missing installs as failed, with its error; the
// saved decision is revoked after a confirmation, and the same call then
// asks again and is denied; the failed server is removed after a
// confirmation.

import { launch, drive, step, shot, expectText, expectLayout } from './harness.mjs';

const base = process.env.LATHE_URL;
const sessionId = process.env.LATHE_SESSION;
const TURN = 30_000; // a loaded 2-core machine

// The Files tree asks once for the Git status of a folder that is not a repository.
const expected = (r) => r.status() === 409 && r.request().method() === 'GET' && new URL(r.url()).pathname.endsWith('/git/status');
const browsing = await launch({ viewport: { width: 1280, height: 800 }, expected });
const { page: a, newPage, problems } = browsing;
const b = await newPage('tab 2');

async function open(page) {
  await page.goto(`${base}/#/sessions/${encodeURIComponent(sessionId)}`);
  await page.locator('[data-conn="live"]').waitFor();
  await page.getByLabel('Message to the Agent').waitFor();
}

const prompts = (page) => page.getByRole('group', { name: /Allow this tool call/ });

/** api calls the daemon from the page (same origin, its cookie). */
async function api(page, method, url) {
  return page.evaluate(async ([m, u]) => {
    const r = await fetch(u, { method: m });
    return { status: r.status, body: await r.json() };
  }, [method, url]);
}

/** widths checks the layout at 1024, 800 and 390 px, then goes back to 1280. */
async function widths(page, what) {
  for (const width of [1024, 800, 390]) {
    await page.setViewportSize({ width, height: 800 });
    await expectLayout(page, `${width} with ${what}`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });
}

async function run() {
  step('two tabs on the Session');
  await open(a);
  await open(b);

  // The dock closed, so the prompt has the conversation's height (and the screen shows the turn).
  const dock = a.getByRole('group', { name: 'Tools' }).getByRole('button', { name: 'Terminal' });
  if ((await dock.getAttribute('aria-pressed')) === 'true') await dock.click();

  step('a turn calls an MCP tool: the prompt shows in both tabs');
  const composer = a.getByLabel('Message to the Agent');
  await composer.click();
  await a.keyboard.type('ask the server');
  await a.keyboard.press('Enter');
  for (const [name, page] of [['tab 1', a], ['tab 2', b]]) {
    const p = prompts(page);
    await p.first().waitFor({ timeout: TURN }).catch((err) => { throw new Error(`${name}: no approval prompt (${err.message.split('\n')[0]})`); });
    if ((await p.count()) !== 1) throw new Error(`${name}: ${await p.count()} prompts, want 1`);
    await expectText(p.locator('.approval-agent'), 'coder'); // the Agent
    await expectText(p, 'calls tool echo of server t');
    await expectText(p.locator('pre'), '"text": "hello over mcp"'); // the arguments, pretty
    for (const label of ['only this once', 'always for this tool, this Agent', 'always for every tool of this server, this Agent', 'always for this server, every Agent']) {
      await p.getByRole('radio', { name: label, exact: true }).waitFor();
    }
    if (!(await p.getByRole('radio', { name: 'only this once', exact: true }).isChecked())) throw new Error(`${name}: the default scope is not "only this once"`);
    await p.getByRole('button', { name: 'Allow', exact: true }).waitFor();
    await p.getByRole('button', { name: 'Deny', exact: true }).waitFor();
  }
  // The turn's tool card says it waits for the decision.
  await expectText(a.locator('.tool-card.tc-awaiting .tool-state'), 'awaiting your approval');
  // A tab opened after the call parked has it from its snapshot alone.
  await b.reload();
  await open(b);
  await prompts(b).first().waitFor({ timeout: TURN });
  if ((await prompts(b).count()) !== 1) throw new Error(`after a reload, ${await prompts(b).count()} prompts, want 1`);
  // The rail says which Session waits.
  await a.locator('.session-item .session-approval').waitFor();
  await expectLayout(a, '1280 with an approval');
  await shot(a, 'mcp-approval');
  await widths(a, 'an approval');

  step('Allow in tab 2, remembered for this tool and Agent: both prompts close, the turn answers');
  const p2 = prompts(b);
  await p2.getByRole('radio', { name: 'always for this tool, this Agent', exact: true }).check();
  await expectText(p2, 'Covers: echo of t, for coder.');
  await p2.getByRole('button', { name: 'Allow', exact: true }).click();
  await prompts(a).first().waitFor({ state: 'detached', timeout: TURN });
  await prompts(b).first().waitFor({ state: 'detached', timeout: TURN });
  const transcript = a.getByRole('region', { name: 'Conversation' });
  await expectText(transcript.locator('.answer'), 'the server said it', TURN);
  if (await a.locator('.tool-card.tc-awaiting').count()) throw new Error('a tool card still says it awaits approval');
  await expectText(transcript, 'mcp__t__echo');
  if (await a.locator('.session-item .session-approval').count()) throw new Error('the rail still says a tool call waits');

  step('a decision on an approval no longer pending says it was decided elsewhere');
  await b.evaluate(() => lathe.live.send({ cmd: 'mcp-approve', approval_id: 'no-such-approval', decision: 'allow', persist: 'once' }));
  await expectText(b.locator('.toast'), 'already decided elsewhere');

  step('the MCP panel: the server, its tools and the saved decision');
  await a.getByRole('button', { name: 'MCP servers', exact: true }).click();
  const panel = a.getByRole('region', { name: 'MCP' });
  const servers = panel.getByRole('list', { name: 'Servers' });
  await servers.locator('[data-server="t"] [data-status="connected"]').waitFor();
  await expectText(servers.locator('[data-server="t"]'), 'Connected');
  await expectText(panel.getByRole('list', { name: 'Tools' }), 't › echo');
  const saved = panel.getByRole('list', { name: 'Saved decisions' });
  await expectText(saved, 'Allowed: tool echo of server t, for Agent coder');
  await expectText(saved, 'always for this tool, this Agent');
  if (a.url().endsWith('#/mcp') === false) throw new Error(`the panel's address is ${a.url()}, want #/mcp`);

  step('install a catalog entry whose command is missing: failed, with its error');
  const entry = panel.getByRole('list', { name: 'Catalog' }).locator('[data-slug="fetch"]');
  await entry.locator('summary').click();
  await entry.getByRole('button', { name: 'Install Fetch' }).click();
  const failed = servers.locator('[data-server="fetch"]');
  await failed.locator('[data-status="failed"]').waitFor({ timeout: TURN });
  await expectText(failed, 'Failed');
  const why = (await failed.locator('.mcp-error').textContent()).trim();
  if (!why) throw new Error('the failed server shows no error');
  await expectText(a.locator('.toast.error'), 'could not start');
  const listed = (await api(a, 'GET', '/api/mcp/servers')).body.find((s) => s.name === 'fetch');
  if (!listed || listed.status !== 'failed' || listed.error.trim() !== why) throw new Error(`the daemon lists fetch as ${JSON.stringify(listed)}, the panel says ${JSON.stringify(why)}`);
  // A form with a required value says so before sending.
  const fs = panel.getByRole('list', { name: 'Catalog' }).locator('[data-slug="filesystem"]');
  await fs.locator('summary').click();
  await expectText(fs.locator('label'), '(required)');
  await expectLayout(a, '1280 on the MCP panel');
  await shot(a, 'mcp-panel');
  await widths(a, 'the MCP panel');
  await fs.locator('summary').click();

  step('revoke the saved decision, after a confirmation');
  await saved.getByRole('button', { name: /^Revoke: Allowed: tool echo of server t/ }).click();
  const confirm = a.getByRole('dialog', { name: 'Revoke this saved decision?' });
  await expectText(confirm, 'Allowed: tool echo of server t, for Agent coder');
  await confirm.getByRole('button', { name: 'Revoke', exact: true }).click();
  await confirm.waitFor({ state: 'detached' });
  await expectText(panel, 'None: every MCP call asks');
  const perms = (await api(a, 'GET', '/api/mcp/permissions')).body;
  if (perms.length !== 0) throw new Error(`saved decisions after the revoke: ${JSON.stringify(perms)}`);

  step('after the revoke the same call asks again; Deny answers the model with an error');
  await open(a);
  await a.getByLabel('Message to the Agent').click();
  await a.keyboard.type('ask again');
  await a.keyboard.press('Enter');
  const again = prompts(a);
  await again.first().waitFor({ timeout: TURN });
  await expectText(again.locator('pre'), '"text": "asks again"');
  await again.getByRole('button', { name: 'Deny', exact: true }).click();
  await again.first().waitFor({ state: 'detached', timeout: TURN });
  await expectText(transcript.locator('.answer'), 'ok, not allowed', TURN);
  await expectText(transcript, 'denied by the operator');
  if ((await api(a, 'GET', '/api/mcp/permissions')).body.length !== 0) throw new Error('a decision for this call only was saved');
  await a.getByRole('button', { name: 'MCP servers', exact: true }).click();

  step('remove the failed server, after a confirmation');
  await failed.getByRole('button', { name: 'Remove…' }).click();
  const rm = a.getByRole('dialog', { name: 'Remove the server fetch?' });
  await rm.getByRole('button', { name: 'Remove server' }).click();
  await failed.waitFor({ state: 'detached' });
  if ((await api(a, 'GET', '/api/mcp/servers')).body.some((s) => s.name === 'fetch')) throw new Error('fetch is still listed after its removal');

  step('the palette opens the panel too');
  await b.keyboard.press('Control+K');
  await b.keyboard.type('MCP servers');
  await b.keyboard.press('Enter');
  await b.getByRole('region', { name: 'MCP' }).getByRole('list', { name: 'Servers' }).locator('[data-server="t"]').waitFor();

  step('the deep link #/mcp survives a reload');
  await b.reload();
  await b.locator('[data-conn="live"]').waitFor();
  await b.getByRole('region', { name: 'MCP' }).getByRole('list', { name: 'Servers' }).locator('[data-server="t"] [data-status="connected"]').waitFor();
}

await drive(browsing, run);
