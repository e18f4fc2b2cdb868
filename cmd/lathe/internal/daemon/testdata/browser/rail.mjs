// Every screen reaches the rail at every width (issue 26 defect 5), driven
// by rail_browser_test.go: one page, resized between 1440, 1024, 800 and
// 390 px; on each screen the way to the rail that width offers (the rail
// itself, the icon rail's toggle, the pane switcher's Menu) must show and
// take a click, the opened rail shows the names and the way to Automations,
// Chats, MCP and the shared files, and a Session opens from the rail; then
// again with the rail collapsed at 1440 px (a remembered choice). No sleeps: every wait is
// Playwright's auto-waiting or an expectation with a timeout.
//
// Environment:
//   LATHE_URL                      the daemon's base URL (one Workspace "rail")
//   LATHE_alpha, LATHE_beta        the IDs of its two Sessions, alpha and beta
//   LATHE_ARTIFACTS                where a failure's screenshot goes

import { drive, expectText, launch, step, unprepared } from './harness.mjs';

const base = process.env.LATHE_URL;
const ids = { alpha: process.env.LATHE_alpha, beta: process.env.LATHE_beta };

const browsing = await launch({ viewport: { width: 1440, height: 900 }, expected: unprepared });
const { page } = browsing;

const WIDTHS = [
  { width: 1440, height: 900, way: 'rail' }, // the rail shows the names (collapsed: its icons take a click)
  { width: 1024, height: 768, way: 'icons' }, // the icon rail: its toggle opens the names
  { width: 800, height: 800, way: 'icons' },
  { width: 390, height: 844, way: 'menu' }, // off-canvas: the pane switcher's Menu opens it
];

/** go moves to a hash the way a link does, and waits until the app has read it. */
async function go(hash) {
  await page.evaluate((h) => { location.hash = h; }, hash);
  await page.waitForFunction((h) => globalThis.lathe?.routeRead === h, hash);
}

// Each screen: how to get there, the Session it shows (the rail then opens
// the other one), the tool beside it, and what the switcher of a narrow
// window calls the pane it shows (never "Conversation" away from a Session).
const SCREENS = [
  { name: 'home', enter: () => go('#/'), pane: 'Home' },
  { name: 'a Session', enter: () => go(`#/sessions/${ids.alpha}`), on: 'alpha', pane: 'Conversation' },
  { name: "a Session's History", enter: () => go(`#/sessions/${ids.alpha}/history`), on: 'alpha', tool: 'History', pane: 'History' },
  { name: 'Automations', enter: () => go('#/automations'), pane: 'Automations' },
  {
    name: 'the screen after leaving Automations',
    enter: async () => {
      await go('#/');
      await go('#/automations');
      await page.evaluate(() => history.back());
      await page.waitForFunction(() => globalThis.lathe?.routeRead === '#/');
    },
    pane: 'Home',
  },
  { name: 'Chats', enter: () => go('#/chats'), pane: 'Chats' },
  { name: 'the shared files', enter: () => go('#/files'), pane: 'Shared files' },
  { name: 'MCP', enter: () => go('#/mcp'), pane: 'MCP servers' },
];

async function run() {
  const rail = page.getByRole('navigation', { name: 'Workspaces and Sessions' });
  const switcher = page.getByRole('navigation', { name: 'Panes' });
  const shell = page.locator('.shell');
  const quick = { timeout: 5_000 };

  await page.goto(`${base}/`);
  await page.locator('[data-conn="live"]').waitFor({ state: 'attached' });
  await rail.getByRole('link', { name: /^beta,/ }).waitFor({ state: 'attached' });

  // Every screen at every width, then, with the rail collapsed at 1440 px
  // (a choice remembered across widths), the screens of the 390 px dead end.
  const dead = new Set(['home', 'a Session', 'Automations', 'the screen after leaving Automations']);
  for (const collapsed of [false, true]) {
    if (collapsed) {
      await page.setViewportSize({ width: 1440, height: 900 });
      await rail.getByRole('button', { name: 'Collapse the rail' }).click(quick);
      await shell.and(page.locator('.rail-collapsed')).waitFor(quick);
    }
    for (const size of WIDTHS) {
      await page.setViewportSize({ width: size.width, height: size.height });
      for (const screen of SCREENS.filter((sc) => !collapsed || dead.has(sc.name))) {
        await reach(size, screen, `${size.width} px${collapsed ? ' (rail collapsed at 1440 px)' : ''}, ${screen.name}`, collapsed);
      }
    }
  }

  /** reach opens the other Session from the rail on screen at size, the way that width offers. */
  async function reach(size, screen, where, collapsed) {
    step(`${where}: reaches the rail and opens a Session from it`);
    await screen.enter();
    if (await shell.evaluate((el) => el.classList.contains('rail-open'))) throw new Error(`${where}: the rail is open before it is asked for`);
    if (screen.tool) await page.getByRole('complementary', { name: screen.tool }).waitFor(quick);

    if (size.way === 'menu') {
      const pressed = switcher.locator('button[aria-pressed="true"]');
      if (screen.pane) await expectText(pressed, screen.pane, 5_000);
      if (!screen.on && await switcher.getByRole('button', { name: 'Conversation' }).count()) {
        throw new Error(`${where}: the switcher says "Conversation"`);
      }
      if (await rail.isVisible()) throw new Error(`${where}: the off-canvas rail shows before it is asked for`);
    }

    const other = screen.on === 'alpha' ? 'beta' : 'alpha';
    const link = rail.getByRole('link', { name: new RegExp(`^${other},`) });
    const name = link.locator('.session-name');
    if (size.way === 'rail' && collapsed) {
      // The collapsed rail is icons with initials: the icon itself opens the Session.
      await link.locator('.session-initials').waitFor(quick).catch(() => { throw new Error(`${where}: the collapsed rail shows no initials`); });
    } else if (size.way === 'rail') {
      if (!(await name.isVisible())) throw new Error(`${where}: the rail does not show the Sessions' names`);
    } else {
      if (size.way === 'icons' && !(await link.isVisible())) throw new Error(`${where}: the icon rail does not show the Sessions`);
      const toggle = size.way === 'menu'
        ? switcher.getByRole('button', { name: 'Menu' })
        : rail.getByRole('button', { name: 'Open the rail' });
      await toggle.click(quick).catch((e) => { throw new Error(`${where}: no usable way to the rail: ${e.message.split('\n')[0]}`); });
      await name.waitFor(quick).catch(() => { throw new Error(`${where}: the rail opened without the Sessions' names`); });
      // The opened rail leads everywhere else too.
      for (const to of ['Automations', 'Chats', 'MCP servers', 'Shared files']) {
        if (!(await rail.getByRole('button', { name: to }).isVisible())) throw new Error(`${where}: the opened rail has no ${to}`);
      }
    }
    await link.click(quick).catch((e) => { throw new Error(`${where}: the rail's Session cannot be clicked: ${e.message.split('\n')[0]}`); });
    await page.waitForFunction((id) => globalThis.lathe?.routeRead === `#/sessions/${id}`, ids[other], quick)
      .catch(() => { throw new Error(`${where}: the rail did not open ${other}`); });
    await expectText(page.locator('.session-head h1'), other, 5_000);
    if (await shell.evaluate((el) => el.classList.contains('rail-open'))) throw new Error(`${where}: the rail stays open over the Session it opened`);
  }
}

await drive(browsing, run);
