// A lattice Session in the workbench, in a real headless Chromium against a
// real daemon whose team (a coordinator and two Workers) talks to the
// scripted model server, driven by lattice_browser_test.go. No sleeps:
// every wait is Playwright's auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL (no API key: auth is off)
//   LATHE_SESSION    a Ready lattice Session
//   LATHE_ARTIFACTS  where a failure's screenshot goes
//
// Flow: the whole team takes a turn: the plan shows its two subtasks (b
// after a) with their Workers; w1's stream completes while w2's is held
// mid-stream; a reload mid-turn shows the plan and both streams again (from
// the snapshot); "SIGNAL release" lets w2 finish; the coordinator's answer
// follows and each Worker's stream is marked completed and collapses. Then
// the Worker picker addresses w2 alone.

import { launch, drive, step, shot, expectText, expectLayout } from './harness.mjs';

const base = process.env.LATHE_URL;
const sessionId = process.env.LATHE_SESSION;
const TURN = 30_000;

// The Files tree asks once for the Git status of a folder that is not a repository.
const expected = (r) => r.status() === 409 && r.request().method() === 'GET' && new URL(r.url()).pathname.endsWith('/git/status');
const browsing = await launch({ viewport: { width: 1280, height: 800 }, expected });
const { page } = browsing;

const transcript = () => page.getByRole('region', { name: 'Conversation' });
const turn = (n) => transcript().locator('.turn').nth(n - 1);
const plan = (n) => turn(n).getByRole('region', { name: 'Plan' });
const stream = (n, w) => turn(n).locator(`.lattice-stream[data-worker="${w}"]`);
const subtask = (n, id) => plan(n).locator(`.lattice-subtask[data-subtask="${id}"]`);

async function open() {
  await page.goto(`${base}/#/sessions/${encodeURIComponent(sessionId)}`);
  await page.locator('[data-conn="live"]').waitFor();
  await page.getByLabel('Message to the Agent').waitFor();
}

async function send(text) {
  await page.getByLabel('Message to the Agent').click();
  await page.keyboard.type(text);
  await page.keyboard.press('Enter');
}

async function expectState(locator, attr, want) {
  await page.waitForFunction(([sel, a, w]) => {
    const el = document.querySelector(sel);
    return el && el.getAttribute(a) === w;
  }, [await locator.evaluate((el) => {
    el.dataset.probe = el.dataset.probe || Math.random().toString(36).slice(2);
    return `[data-probe="${el.dataset.probe}"]`;
  }), attr, want], { timeout: TURN }).catch(async (err) => {
    throw new Error(`${attr} is ${await locator.getAttribute(attr)}, want ${want} (${err.message.split('\n')[0]})`);
  });
}

async function run() {
  step('the Worker picker offers the whole team and each Worker');
  await open();
  const picker = page.getByLabel('Who takes the next turn');
  const options = await picker.locator('option').allTextContents();
  // Agents are named by their names, never their IDs (w1, w2), everywhere.
  if (options.join('|') !== 'Whole team|Worker One|Worker Two') throw new Error(`picker options ${options.join('|')}`);

  step('the whole team: the plan, then each Worker streams in its own part of the turn');
  await send('build the thing');
  await expectText(plan(1), 'build the thing', TURN);
  await expectText(subtask(1, 'a').locator('.lattice-worker'), 'Worker One');
  await expectText(subtask(1, 'b').locator('.lattice-worker'), 'Worker Two');
  await expectText(plan(1).locator('.who'), 'by Planner');
  // The plan's graph, drawn by the Automations editor's component: a node
  // per subtask with its Worker, an edge for the dependency.
  const graph = plan(1).locator('lathe-graph');
  await graph.locator('.drawflow-node').nth(1).waitFor();
  if ((await graph.locator('.drawflow-node').count()) !== 2 || (await graph.locator('.connection').count()) !== 1) {
    throw new Error(`the plan graph has ${await graph.locator('.drawflow-node').count()} nodes and ${await graph.locator('.connection').count()} edges`);
  }
  await expectText(graph, 'Worker Two');
  await expectText(subtask(1, 'b').locator('.lattice-after'), 'after a');
  if ((await plan(1).locator('.lattice-round').count()) !== 2) throw new Error('the plan should show two rounds: a, then b');
  await expectState(stream(1, 'w1').locator('.worker-state'), 'data-state', 'completed');
  if (await stream(1, 'w1').evaluate((d) => d.open)) throw new Error('a completed Worker\'s stream should start collapsed');
  await expectText(stream(1, 'w1').locator('summary b'), 'Worker One');
  await stream(1, 'w1').locator('summary').click();
  await expectText(stream(1, 'w1').locator('.answer'), 'a is done', TURN);
  await expectText(stream(1, 'w2').locator('.answer'), 'b sees', TURN);
  await expectState(stream(1, 'w2').locator('.worker-state'), 'data-state', 'running');
  await expectState(subtask(1, 'b').locator('.lattice-state'), 'data-status', 'activated');
  if (!(await stream(1, 'w2').evaluate((d) => d.open))) throw new Error('the running Worker\'s stream starts collapsed');
  await shot(page, 'lattice');
  await expectLayout(page, '1280 with a lattice turn');

  step('a reload mid-turn: the plan and the Workers so far, from the snapshot');
  await open();
  await expectText(subtask(1, 'a').locator('.lattice-state'), 'completed', TURN);
  await expectState(stream(1, 'w1').locator('.worker-state'), 'data-state', 'completed');
  await stream(1, 'w1').locator('summary').click();
  await expectText(stream(1, 'w1').locator('.answer'), 'a is done', TURN);
  await expectText(stream(1, 'w2').locator('.answer'), 'b sees', TURN);
  console.log('SIGNAL release');

  step('w2 finishes, the coordinator answers, both Workers are marked completed');
  await expectText(turn(1).locator('.lattice-synthesis .answer'), 'Done: a and b', TURN);
  await expectText(turn(1).locator('.turn-status'), 'Done', TURN);
  await expectState(stream(1, 'w2').locator('.worker-state'), 'data-state', 'completed');
  await expectState(subtask(1, 'b').locator('.lattice-state'), 'data-status', 'completed');
  if (!(await stream(1, 'w2').evaluate((d) => d.open))) await stream(1, 'w2').locator('summary').click();
  await expectText(stream(1, 'w2').locator('.answer'), 'b sees alpha', TURN);
  if ((await stream(1, 'w2').locator('.answer').count()) !== 1) throw new Error('w2\'s text shows more than once');
  await stream(1, 'w2').locator('summary').click();
  if (await stream(1, 'w2').evaluate((d) => d.open)) throw new Error('a Worker\'s stream does not collapse');
  for (const width of [1024, 800, 390]) {
    await page.setViewportSize({ width, height: 800 });
    await expectLayout(page, `${width} with a lattice turn`);
  }
  await page.setViewportSize({ width: 1280, height: 800 });

  step('the Worker picker addresses one Worker alone');
  await page.getByLabel('Who takes the next turn').selectOption('w2');
  await send('just you');
  await expectText(turn(2).locator('.agent-turn > .who'), 'Worker Worker Two');
  await expectText(turn(2).locator('.answer'), 'just me', TURN);
  if (await turn(2).getByRole('region', { name: 'Plan' }).count()) throw new Error('a targeted turn shows a plan');
}

await drive(browsing, run);
