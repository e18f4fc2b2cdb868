// Automations in the workbench, in a real headless Chromium against a real
// daemon, driven by automations_browser_test.go. No sleeps: every wait is
// Playwright's auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL (no API key: auth is off)
//   LATHE_ARTIFACTS  where a failure's screenshot goes
//
// Flows: a new Automation from the tree (an approval, then an echo), drawn
// as a graph; a node edited to an unknown template is refused on Save with
// the error shown on that node; a node added and connected by dragging an
// edge on the graph; Run: the run waits, and its Interrupt shows as a prompt
// in a second tab, and again after a reload; Resume in one tab closes it in
// both, and the history shows the run succeeded with each node's state and
// output; Fork reruns it, and Cancel wakes that one's Interrupt with an
// empty value; the layout holds at four widths.

import { launch, drive, step, shot, expectText, expectLayout } from './harness.mjs';

const base = process.env.LATHE_URL;
// A refused save is the flow's own 400.
const expected = (r) => r.status() === 400 && r.request().method() === 'PUT' && new URL(r.url()).pathname.startsWith('/api/automations/');
const browsing = await launch({ viewport: { width: 1280, height: 800 }, expected });
const { page: a, newPage, problems } = browsing;
const b = await newPage('tab 2');

const prompts = (page) => page.getByRole('group', { name: /^Interrupt ask of nightly/ });

async function open(page, hash = '#/automations') {
  await page.goto(`${base}/${hash}`);
  await page.locator('[data-conn="live"]').waitFor();
}

async function run() {
  step('the Automations view from the rail');
  await open(a, '');
  await a.getByRole('button', { name: /^Automations/ }).click();
  await a.getByRole('region', { name: 'Automations' }).waitFor();

  step('a new Automation: an approval, then an echo, drawn as a graph');
  await a.getByRole('button', { name: '+ Automation' }).click();
  const form = a.getByRole('form', { name: 'New Automation' });
  await form.getByLabel('ID').fill('nightly');
  await form.getByLabel('Name').fill('Nightly review');
  await form.getByRole('button', { name: 'Create' }).click();
  await a.getByRole('tree', { name: 'Automations' }).getByRole('link', { name: /Nightly review/ }).waitFor();
  const graph = a.getByRole('group', { name: 'Graph of Nightly review' });
  await graph.locator('[data-node="ask"]').waitFor();
  await graph.locator('[data-node="done"]').waitFor();
  if ((await graph.locator('.connection').count()) !== 1) throw new Error('the edge ask → done is not drawn');

  step('a bad template is refused on Save, shown on its node');
  await graph.locator('[data-node="done"]').click();
  await a.locator('.node-raw > summary').click(); // the raw JSON, behind its toggle
  const nodeJSON = a.getByLabel('Node JSON');
  await nodeJSON.waitFor();
  await nodeJSON.fill(JSON.stringify({ id: 'done', kind: 'tool', tool_id: 'lathe__echo', input: '{"text": "{{node:ghost}}"}' }));
  await a.getByRole('button', { name: 'Apply' }).click();
  await a.getByRole('button', { name: 'Save', exact: true }).click();
  await expectText(a.getByRole('alert').first(), 'no such node');
  await expectText(graph.locator('[data-node="done"] .lg-error'), 'no such node');
  await nodeJSON.fill(JSON.stringify({ id: 'done', kind: 'tool', tool_id: 'lathe__echo', input: '{"text": "approved: {{node:ask}}"}' }));
  await a.getByRole('button', { name: 'Apply' }).click();

  step('a node added and connected by dragging an edge');
  await a.getByLabel('Node kind').selectOption('tool');
  await a.getByRole('button', { name: 'Add', exact: true }).click();
  const added = graph.locator('[data-node="tool1"]');
  await added.waitFor();
  await graph.scrollIntoViewIfNeeded();
  const out = graph.locator('[data-node="done"] .output_1');
  const inp = added.locator('.input_1');
  const ob = await out.boundingBox();
  const ib = await inp.boundingBox();
  await a.mouse.move(ob.x + ob.width / 2, ob.y + ob.height / 2);
  await a.mouse.down();
  await a.mouse.move(ib.x + ib.width / 2, ib.y + ib.height / 2, { steps: 8 });
  await a.mouse.up();
  await a.waitForFunction(() => lathe.automations.draft.edges.some((e) => e.from === 'done' && e.to === 'tool1'));

  step('a node is edited in a form of its kind: template hints, and what is wrong said inline');
  await a.evaluate(() => lathe.automations.selectNode('tool1'));
  const tool1 = a.getByRole('group', { name: 'Node tool1' });
  const args = tool1.getByLabel('Arguments (JSON)');
  await expectText(tool1, '{{node:<id>}}');
  await args.fill('{"text": "{{node:ghost}}"}');
  await expectText(tool1.getByRole('alert'), 'names no node');
  await args.fill('{"text": "{{trigger}}"}');
  await tool1.getByRole('alert').waitFor({ state: 'detached' });
  await a.getByRole('button', { name: 'Apply' }).click();
  await a.getByRole('button', { name: 'Save', exact: true }).click();
  await a.getByRole('button', { name: 'Save', exact: true }).and(a.locator('[disabled]')).waitFor();
  const saved = await a.evaluate(() => fetch('/api/automations/nightly').then((r) => r.json()));
  if (!saved.edges.some((e) => e.from === 'done' && e.to === 'tool1')) throw new Error(`the drawn edge was not saved: ${JSON.stringify(saved.edges)}`);
  await shot(a, 'automation-editor');

  step('Run: the run waits at its Interrupt, prompted in both tabs and after a reload');
  await open(b, '#/');
  await a.getByLabel('Run input').fill('the fix plan');
  await a.getByRole('button', { name: 'Run', exact: true }).click();
  for (const [name, page] of [['tab 1', a], ['tab 2', b]]) {
    const p = prompts(page);
    await p.first().waitFor({ timeout: 20_000 }).catch((err) => { throw new Error(`${name}: no Interrupt prompt (${err.message.split('\n')[0]})`); });
    await expectText(p, 'Approve: the fix plan');
  }
  await expectText(a.getByRole('list', { name: 'Run history' }), 'waiting');
  await b.reload();
  await b.locator('[data-conn="live"]').waitFor();
  await prompts(b).first().waitFor();
  await graph.locator('[data-node="ask"].st-waiting').waitFor();

  step('Resume in tab 2 closes the prompt in both; the history shows the run succeeded');
  await prompts(b).getByLabel('Answer to ask').fill('ship it');
  await prompts(b).getByRole('button', { name: 'Resume' }).click();
  await prompts(a).waitFor({ state: 'detached' });
  await prompts(b).waitFor({ state: 'detached' });
  const detail = a.getByRole('group', { name: /^Run / });
  await detail.locator('.run-state[data-state="succeeded"]').first().waitFor({ timeout: 20_000 });
  await expectText(detail.locator('tr[data-node="ask"]'), 'ship it');
  await expectText(detail.locator('tr[data-node="done"]'), 'approved: ship it');
  await expectText(detail.locator('tr[data-node="tool1"]'), 'succeeded');
  await expectText(detail.getByLabel('Run output'), '');
  await graph.locator('[data-node="done"].st-succeeded').waitFor();
  await a.getByRole('button', { name: 'Close', exact: true }).click();
  await detail.scrollIntoViewIfNeeded();
  await shot(a, 'automation-run');

  step('Fork reruns it; Cancel wakes its Interrupt with an empty value');
  await detail.getByRole('button', { name: 'Fork' }).click();
  await prompts(a).first().waitFor({ timeout: 20_000 });
  await prompts(a).getByRole('button', { name: 'Cancel' }).click();
  await prompts(a).waitFor({ state: 'detached' });
  await expectText(a.getByRole('list', { name: 'Run history' }), 'fork');
  const runs = await a.evaluate(() => fetch('/api/automations/nightly/runs').then((r) => r.json()));
  await a.waitForFunction(async () => {
    const rs = await fetch('/api/automations/nightly/runs').then((r) => r.json());
    return rs.length === 2 && rs.every((r) => r.state === 'succeeded');
  }, null, { timeout: 20_000 });
  if (runs.length !== 2 || runs[0].trigger.fork_of !== runs[1].run_id) throw new Error(`runs: ${JSON.stringify(runs.map((r) => [r.run_id, r.trigger]))}`);
  const forked = await a.evaluate((id) => fetch(`/api/automations/nightly/runs/${id}`).then((r) => r.json()), runs[0].run_id);
  if (forked.nodes.ask.output !== undefined && forked.nodes.ask.output !== '') throw new Error(`a cancelled Interrupt's output: ${JSON.stringify(forked.nodes.ask)}`);

  step('the deep link survives a reload, with the history');
  await a.reload();
  await a.locator('[data-conn="live"]').waitFor();
  await a.getByRole('group', { name: 'Graph of Nightly review' }).locator('[data-node="tool1"]').waitFor();
  await expectText(a.getByRole('list', { name: 'Run history' }), 'succeeded');

  step('the layout at four widths');
  for (const width of [1024, 800, 390]) {
    await a.setViewportSize({ width, height: 800 });
    await expectLayout(a, `${width} with the Automations view`);
  }
  await a.setViewportSize({ width: 1280, height: 800 });
}

await drive(browsing, run);
