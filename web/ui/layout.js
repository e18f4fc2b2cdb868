// The workbench's layout controls: the rail, inspector and terminal dock
// resized by dragging (or with the arrow keys) and remembered, the one-pane
// switcher of narrow windows, and the theme toggle.

import { html, nothing } from '/vendor/lit.js';
import { persisted, THEMES, theme, setTheme } from './util.js';
import { clampSize, SIZE_LIMITS } from './sizes.js';

const sizesPref = persisted('sizes', {});

/** NARROW is the width at and below which one pane shows at a time. */
export const NARROW = '(max-width: 720px)';

/** ICONS is the width at and below which the rail is icons, its names a flyout (off-canvas when NARROW). */
export const ICONS = '(max-width: 1100px)';

const icons = () => typeof matchMedia === 'function' && matchMedia(ICONS).matches;

/**
 * railClass is the shell's rail classes. Collapsed is a choice for wide
 * windows only: at and below ICONS the rail is icons anyway, and the choice,
 * remembered, must not strip the names from its flyout (or from the
 * off-canvas rail). Open is the flyout of those widths.
 */
export function railClass(ui) {
  return [ui.railCollapsed && !icons() ? 'rail-collapsed' : '', ui.railOpen && icons() ? 'rail-open' : ''].filter(Boolean).join(' ');
}

/**
 * railToggleLabel says what the rail's ☰ does at this width: open or close
 * the flyout (or off-canvas rail) at and below ICONS, else expand or
 * collapse the rail in place.
 */
export function railToggleLabel(ui) {
  if (icons()) return ui.railOpen ? 'Close the rail' : 'Open the rail';
  return ui.railCollapsed ? 'Expand the rail' : 'Collapse the rail';
}

export class Layout {
  constructor(app) {
    this.app = app;
    this.sizes = { ...sizesPref.get() }; // rail, insp, dock: pixels the user chose
    this.pane = 'main'; // in a narrow window: 'main' | 'inspector' | 'dock'
    this.drag = null;
  }

  /** style is the shell's custom properties for the remembered sizes. */
  style() {
    const s = this.sizes;
    return [
      s.rail ? `--rail-user: ${s.rail}px` : '',
      s.insp ? `--insp-user: ${s.insp}px` : '',
      s.dock ? `--dock-h: ${s.dock}px` : '',
    ].filter(Boolean).join('; ');
  }

  set(which, px) {
    this.sizes[which] = clampSize(which, px, { width: innerWidth, height: innerHeight });
    this.app.update();
  }

  save() {
    sizesPref.set(this.sizes);
  }

  /** start begins a drag of a separator; pointer moves resize until it is let go. */
  start(which, e) {
    if (e.button !== 0) return;
    e.preventDefault();
    const el = e.currentTarget;
    el.setPointerCapture(e.pointerId);
    const pane = document.querySelector(which === 'rail' ? '.rail' : which === 'insp' ? '.inspector' : '.dock-body');
    const r = pane?.getBoundingClientRect();
    this.drag = { which, x: e.clientX, y: e.clientY, from: which === 'dock' ? r?.height || 240 : r?.width || 300 };
    const move = (ev) => {
      const d = this.drag;
      if (!d) return;
      const delta = d.which === 'rail' ? ev.clientX - d.x : d.which === 'insp' ? d.x - ev.clientX : d.y - ev.clientY;
      this.set(d.which, d.from + delta);
    };
    const up = () => {
      this.drag = null;
      el.removeEventListener('pointermove', move);
      el.removeEventListener('pointerup', up);
      el.removeEventListener('pointercancel', up);
      this.save();
      this.app.dock.fit?.();
    };
    el.addEventListener('pointermove', move);
    el.addEventListener('pointerup', up);
    el.addEventListener('pointercancel', up);
  }

  /** key resizes a focused separator with the arrow keys (16 px a press). */
  key(which, e) {
    const grow = { rail: 'ArrowRight', insp: 'ArrowLeft', dock: 'ArrowUp' }[which];
    const shrink = { rail: 'ArrowLeft', insp: 'ArrowRight', dock: 'ArrowDown' }[which];
    if (e.key !== grow && e.key !== shrink) return;
    e.preventDefault();
    const pane = document.querySelector(which === 'rail' ? '.rail' : which === 'insp' ? '.inspector' : '.dock-body');
    const r = pane?.getBoundingClientRect();
    const now = this.sizes[which] || (which === 'dock' ? r?.height : r?.width) || 240;
    this.set(which, now + (e.key === grow ? 16 : -16));
    this.save();
  }

  /** show picks the pane of a narrow window. */
  show(pane) {
    this.pane = pane;
    this.app.update();
  }

  /**
   * routed picks the pane a narrow window shows after the route moved to
   * another Session or tool: in a narrow window the tool the route names (a
   * deep link such as History's), else the centre, so a Session opened from
   * the rail shows its conversation, not the pane the last one left open.
   */
  routed(route, prev, tool) {
    if (route.session !== prev.session || route.tool !== prev.tool) this.pane = tool && this.narrow() ? 'inspector' : 'main';
  }

  narrow() {
    return typeof matchMedia === 'function' && matchMedia(NARROW).matches;
  }
}

/** resizerView is a separator that resizes the rail, the inspector or the dock. */
export function resizerView(app, which) {
  const L = app.layout;
  const names = { rail: 'Resize the rail', insp: 'Resize the inspector', dock: 'Resize the terminal dock' };
  const lim = SIZE_LIMITS[which];
  return html`<div class="resizer rz-${which}" role="separator" tabindex="0" aria-label=${names[which]}
    aria-orientation=${which === 'dock' ? 'horizontal' : 'vertical'} aria-valuemin=${lim.min}
    aria-valuenow=${L.sizes[which] || nothing} title="Drag to resize (or use the arrow keys); the size is remembered"
    @pointerdown=${(e) => L.start(which, e)} @keydown=${(e) => L.key(which, e)}></div>`;
}

/** VIEW_NAMES name the centre of a view other than a Session's conversation. */
const VIEW_NAMES = { mcp: 'MCP servers', automations: 'Automations', chats: 'Chats', files: 'Shared files' };

/** mainPaneName is what the switcher calls the centre pane of a route. */
export function mainPaneName(route, s) {
  if (route.view) return VIEW_NAMES[route.view] || 'Main';
  return s ? 'Conversation' : 'Home';
}

/**
 * paneSwitcherView is the bottom switcher of a narrow window: one pane at a
 * time. Its first button opens the rail on every screen, so Sessions,
 * Automations and Chats are always one tap away; Tools and Terminal show
 * only where a Session is open.
 */
export function paneSwitcherView(app, s) {
  const L = app.layout;
  const tool = app.ui.inspector;
  const labels = { files: 'Files', environment: 'Environment', git: 'Source Control', preview: 'Preview', history: 'History', ways: 'Ways' };
  const tab = (pane, label, run) => html`<button type="button" aria-pressed=${L.pane === pane ? 'true' : 'false'}
    @click=${run}>${label}</button>`;
  return html`<nav class="pane-switcher" aria-label="Panes">
    <button type="button" class="switch-rail" title="Workspaces, Sessions, Automations, Chats, MCP and the shared files"
      aria-expanded=${app.ui.railOpen ? 'true' : 'false'} @click=${() => { app.ui.railOpen = true; app.update(); }}><span aria-hidden="true">☰ </span>Menu</button>
    ${tab('main', mainPaneName(app.ui.route, s), () => L.show('main'))}
    ${s ? tab('inspector', tool ? labels[tool] || 'Tool' : 'Tools', () => {
      if (!app.ui.inspector) app.showTool('files');
      L.show('inspector');
    }) : nothing}
    ${s ? tab('dock', 'Terminal', () => {
      if (!app.ui.dockOpen) app.toggleDock();
      L.show('dock');
    }) : nothing}
  </nav>`;
}

/** themeView is the theme toggle: system, light or dark, remembered. */
export function themeView(app) {
  const t = theme();
  const next = THEMES[(THEMES.indexOf(t) + 1) % THEMES.length];
  const icon = { system: '◐', light: '☀', dark: '☾' }[t];
  return html`<button type="button" class="icon theme-toggle" aria-label="Theme: ${t}. Switch to ${next}"
    title="Theme: ${t} (click for ${next})" @click=${() => { setTheme(next); app.update(); }}>${icon}</button>`;
}
