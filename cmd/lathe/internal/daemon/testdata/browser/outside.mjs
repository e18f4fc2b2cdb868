// An outside agent (the real Claude Code) in the workbench, in a real
// headless Chromium against a real daemon, driven by
// outside_browser_test.go. No sleeps: every wait is Playwright's
// auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL
//   LATHE_SESSION    a Ready Session on the outside Agent "claude" (named
//                    Claude Code), on a Git Workspace
//   LATHE_ARTIFACTS  where a failure's screenshot goes
//
// Flow: a turn whose agent writes a plan (TodoWrite) shows, while it runs,
// which agent ran it ("Claude Code 0.23.1 · m1") and the plan as a
// checklist, its second entry in progress; "SIGNAL release" lets the model
// go on, and the plan's entries are all done when the turn ends. A reload
// shows both again from the turn's record. Then a Ways set races Claude
// Code against the built-in loop: its lane card names the agent, its
// version and model; the built-in lane's its model.

import { drive, expectText, expectLayout, launch, shot, step } from './harness.mjs';

const direct = process.env.LATHE_URL;
const id = process.env.LATHE_SESSION;
const base = `http://localhost:${new URL(direct).port}`;
const TURN = 90_000; // a sandbox and an agent process on a loaded 2-core machine

const expected = (r) => {
  const u = new URL(r.url());
  const m = r.request().method();
  return (r.status() === 502 && u.pathname === '/api/llm/models') ||
    (r.status() === 409 && m === 'GET' && /^\/api\/sessions\/[^/]+\/(git\/status|git\/branches|tree|tasks)$/.test(u.pathname)); // suspended while the Ways set runs
};
const browsing = await launch({ viewport: { width: 1280, height: 800 }, expected });
const { page } = browsing;

const turn = (n) => page.getByRole('region', { name: 'Conversation' }).locator('.turn').nth(n - 1);
const plan = (n) => turn(n).getByRole('region', { name: 'Plan' });
const entry = (n, i) => plan(n).locator('.plan-entry').nth(i);

async function open() {
  await page.goto(`${base}/#/sessions/${encodeURIComponent(id)}`);
  await page.locator('[data-conn="live"]').waitFor();
  await page.getByLabel('Message to the Agent').waitFor();
}

async function expectStatus(locator, want) {
  await locator.and(page.locator(`[data-status="${want}"]`)).waitFor({ timeout: TURN }).catch(async (err) => {
    throw new Error(`data-status is ${await locator.getAttribute('data-status')}, want ${want} (${err.message.split('\n')[0]})`);
  });
}

async function checkPlan(second, done) {
  await expectText(plan(1), `Plan · ${done} of 2 done`, TURN);
  await expectText(entry(1, 0).locator('.plan-content'), 'Read the task');
  await expectStatus(entry(1, 0), 'completed');
  await expectText(entry(1, 1).locator('.plan-content'), 'Write the answer');
  await expectStatus(entry(1, 1), second);
}

async function run() {
  step('a turn of Claude Code: who ran it and its plan, live');
  await open();
  await page.getByLabel('Message to the Agent').click();
  await page.keyboard.type('plan it');
  await page.keyboard.press('Enter');
  await expectText(turn(1).locator('.agent-turn > .who .turn-ran'), 'Claude Code 0.23.1 · m1', TURN);
  const title = await turn(1).locator('.turn-ran').getAttribute('title');
  if (!title.includes('@zed-industries/claude-agent-acp 0.23.1')) throw new Error(`the header's title says ${title}`);
  await checkPlan('in_progress', 1);
  await expectText(entry(1, 1).locator('.plan-status'), 'in progress');
  await expectText(turn(1).locator('.agent-turn .turn-status'), 'Working…');
  await shot(page, 'outside-agent');
  await expectLayout(page, '1280 with an outside agent\'s plan');
  console.log('SIGNAL release');

  step('the plan moves on and the turn ends');
  await expectText(turn(1).locator('.agent-turn .turn-status'), 'Done', TURN);
  await checkPlan('completed', 2);
  await expectText(turn(1).locator('.answer'), 'Planned and done.');
  if ((await plan(1).count()) !== 1) throw new Error('the plan shows more than once');

  step('History: a reload shows both from the turn\'s record');
  await open();
  await expectText(turn(1).locator('.agent-turn > .who .turn-ran'), 'Claude Code 0.23.1 · m1', TURN);
  await checkPlan('completed', 2);

  step('Ways: Claude Code against the built-in loop, each lane card naming what ran it');
  const resp = await page.evaluate(async ([url]) => {
    const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ input: 'race', lanes: [{ agent_id: 'claude' }, { agent_id: 'coder', model: 'm2' }] }) });
    return `${r.status} ${await r.text()}`;
  }, [`${base}/api/sessions/${encodeURIComponent(id)}/variants`]);
  if (!resp.startsWith('202')) throw new Error(`POST variants: ${resp}`);
  await page.getByRole('button', { name: 'Ways', exact: true }).click();
  const ways = page.getByRole('complementary', { name: 'Ways' });
  const lane = (i) => ways.getByRole('article', { name: `Attempt ${i}` });
  await expectText(lane(0).locator('.lane-ran'), 'Claude Code 0.23.1 · m1', TURN);
  await expectText(lane(0), 'claude lane done', TURN);
  await expectText(lane(1), 'built-in lane done', TURN);
  await expectText(lane(1).locator('.lane-ran'), 'm2');
  if ((await lane(1).locator('.lane-ran').textContent()).includes('Claude')) throw new Error('the built-in lane names Claude Code');
  await expectLayout(page, '1280 with an outside agent\'s lane');
}

await drive(browsing, run);
