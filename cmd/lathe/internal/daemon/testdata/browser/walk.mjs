// The workbench's second walk (issue 26) in a real headless Chromium
// against a daemon without sandboxes, driven by walk_browser_test.go. No
// sleeps: every wait is Playwright's auto-waiting or an expectation with a
// timeout.
//
// Environment:
//   LATHE_URL        the daemon's base URL; one Workspace "walk" is registered,
//                    the Agents are Coder, Planner (the lattice coordinator),
//                    Worker One and Worker Two
//   LATHE_ARTIFACTS  where a failure's screenshot goes

import { drive, expectLayout, expectText, expectValue, launch, step, unprepared } from './harness.mjs';

const base = process.env.LATHE_URL;

// Refusals the flow causes on purpose: none of the Ways panel's (defect 8),
// only those of a daemon without sandboxes (unprepared).
const browsing = await launch({ viewport: { width: 390, height: 844 }, expected: unprepared });
const { page } = browsing;

async function run() {
  const rail = page.getByRole('navigation', { name: 'Workspaces and Sessions' });
  const switcher = page.getByRole('navigation', { name: 'Panes' });
  const menu = switcher.getByRole('button', { name: 'Menu' });

  step('390 px: the home screen reaches the rail');
  await page.goto(`${base}/`);
  await page.locator('[data-conn="live"]').waitFor({ state: 'attached' });
  await expectText(page.locator('.main'), 'Choose a Session in the rail');
  await expectLayout(page, '390 px, home');
  if (await rail.isVisible()) throw new Error('the off-canvas rail shows before it is asked for');
  await menu.click();
  await rail.getByRole('button', { name: 'Automations' }).click();

  step('390 px: Automations names itself in the switcher, and reaches the rail');
  await page.waitForURL(/#\/automations$/);
  await expectText(switcher.locator('button[aria-pressed="true"]'), 'Automations');
  if (await switcher.getByRole('button', { name: 'Conversation' }).count()) throw new Error('the switcher on Automations says "Conversation"');
  await expectLayout(page, '390 px, Automations');
  await menu.click();
  await rail.getByRole('button', { name: 'Chats' }).click();
  await page.waitForURL(/#\/chats$/);
  await expectText(switcher.locator('button[aria-pressed="true"]'), 'Chats');
  await menu.click();
  await rail.getByRole('button', { name: 'MCP servers' }).click();
  await page.waitForURL(/#\/mcp$/);
  await menu.click();

  step('the New Session dialog offers Lattice, with its team in one sentence and narrowed per Session');
  await rail.getByRole('button', { name: '+ Session' }).click();
  const dialog = page.getByRole('dialog', { name: 'New Session' });
  await dialog.getByLabel('Name', { exact: true }).fill('team session');
  await dialog.getByLabel('A team (Lattice)').check();
  await expectText(dialog.locator('.lattice-explain'), 'The coordinator Planner plans each turn');
  await dialog.getByLabel('Worker One').waitFor();
  await dialog.getByLabel('Worker Two').uncheck();
  await expectLayout(page, '390 px, the New Session dialog');
  await dialog.getByRole('button', { name: 'Create Session' }).click();
  await page.waitForURL(/#\/sessions\/[0-9A-Z]+/);
  const teamId = decodeURIComponent(page.url().split('#/sessions/')[1].split('/')[0]);
  const made = await page.evaluate((id) => fetch(`/api/sessions/${id}`).then((r) => r.json()), teamId);
  if (made.mode.kind !== 'lattice' || JSON.stringify(made.mode.workers) !== '["w1"]') throw new Error(`the Session's mode is ${JSON.stringify(made.mode)}`);
  await expectText(page.locator('.session-head'), 'Lattice');
  await expectText(switcher.locator('button[aria-pressed="true"]'), 'Conversation');

  step('the palette finds the Lattice mode too');
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.keyboard.press('Control+k');
  const palette = page.getByRole('dialog', { name: 'Command palette' });
  await palette.getByRole('combobox').fill('lattice');
  await expectText(palette.getByRole('option').first(), 'New Lattice Session');
  await palette.getByRole('combobox').press('Enter');
  await dialog.getByLabel('A team (Lattice)').and(page.locator(':checked')).waitFor();
  await dialog.getByRole('button', { name: 'Cancel' }).click();

  step('a one-Agent Session: its Ways panel with no set asks nothing that fails');
  await rail.getByRole('button', { name: '+ Session' }).click();
  await dialog.getByLabel('Name', { exact: true }).fill('solo');
  await dialog.getByLabel('One Agent').check();
  await dialog.getByRole('button', { name: 'Create Session' }).click();
  await expectText(page.locator('.session-head h1'), 'solo');
  const results = page.waitForResponse((r) => /\/variants\/results/.test(r.url()));
  await page.getByRole('button', { name: 'Ways', exact: true }).click();
  const asked = await results;
  if (asked.status() !== 204) throw new Error(`the Ways panel's read of no set answered ${asked.status()}`);
  const ways = page.getByRole('complementary', { name: 'Ways' });
  await ways.getByLabel('Task').waitFor();

  step("the planner and the judge are chosen in the panel, and remembered for the Workspace");
  const planner = ways.getByLabel('Planner');
  await expectValue(planner, 'coder');
  await planner.selectOption('planner');
  await expectValue(ways.getByLabel('Judge'), 'coder');
  await ways.getByLabel('Judge').selectOption('w2');
  await page.reload();
  await page.getByRole('complementary', { name: 'Ways' }).getByLabel('Task').waitFor();
  await expectValue(page.getByRole('complementary', { name: 'Ways' }).getByLabel('Planner'), 'planner');
  await expectValue(page.getByRole('complementary', { name: 'Ways' }).getByLabel('Judge'), 'w2');
  await page.getByRole('complementary', { name: 'Ways' }).getByLabel('Task').fill('fix the flaky test');
  await page.getByRole('complementary', { name: 'Ways' }).getByRole('button', { name: 'Preview plan' }).click();
  await expectText(page.getByRole('complementary', { name: 'Ways' }).getByLabel('Plan'), 'fix the race');
  // Another Session of the same Workspace has the same choice.
  await rail.getByRole('link', { name: /team session/ }).click();
  await rail.getByRole('button', { name: '+ Session' }).click();
  await dialog.getByLabel('Name', { exact: true }).fill('solo two');
  await dialog.getByLabel('One Agent').check();
  await dialog.getByRole('button', { name: 'Create Session' }).click();
  await expectText(page.locator('.session-head h1'), 'solo two');
  await page.getByRole('button', { name: 'Ways', exact: true }).click();
  await expectValue(page.getByRole('complementary', { name: 'Ways' }).getByLabel('Planner'), 'planner');
  await expectValue(page.getByRole('complementary', { name: 'Ways' }).getByLabel('Judge'), 'w2');

  step('1440 px with a side pane open: every tool of the strip shows');
  await page.setViewportSize({ width: 1440, height: 900 });
  const hidden = await page.evaluate(() => [...document.querySelectorAll('.tool-tabs button')]
    .filter((b) => { const r = b.getBoundingClientRect(); const s = b.parentElement.getBoundingClientRect(); return r.right > s.right + 1 || r.right > innerWidth; })
    .map((b) => b.textContent.trim()));
  if (hidden.length) throw new Error(`tools past the strip's edge at 1440 px: ${hidden.join(', ')}`);

  step('1024 px: the icon rail names each Session by its initials, the whole name in its title');
  await page.setViewportSize({ width: 1024, height: 768 });
  const team = rail.getByRole('link', { name: /team session/ });
  await expectText(team.locator('.session-initials'), 'TS');
  if (!(await team.locator('.session-initials').isVisible())) throw new Error('the icon rail shows bare dots');
  if (!(await team.getAttribute('title')).includes('team session')) throw new Error('the icon has no tooltip with the name');
  await expectLayout(page, '1024 px');
}

await drive(browsing, run);
