// Small helpers shared by the views.

/** isMac reports whether shortcuts use ⌘ rather than Ctrl. */
export const isMac = typeof navigator !== 'undefined' && /Mac|iPhone|iPad/.test(navigator.platform || '');

/** modKey is the shortcut modifier's name. */
export const modKey = isMac ? '⌘' : 'Ctrl';

/** mod reports whether the platform's shortcut modifier is held. */
export function mod(ev) {
  return isMac ? ev.metaKey : ev.ctrlKey;
}

/** newID returns a random identifier for a turn or request. */
export function newID() {
  return crypto.randomUUID();
}

/** relTime renders a timestamp as "3 min ago". */
export function relTime(iso, now = Date.now()) {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const s = Math.round((now - t) / 1000);
  if (s < 60) return 'just now';
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
  return new Date(t).toLocaleDateString();
}

/** bytes renders a size: "512 B", "1.5 KiB". */
export function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1 << 20) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / (1 << 20)).toFixed(1)} MiB`;
}

/** basename is the last element of a slash path. */
export function basename(p) {
  const i = p.lastIndexOf('/');
  return i < 0 ? p : p.slice(i + 1);
}

/** persisted is a small JSON value in localStorage. */
export function persisted(key, fallback) {
  return {
    get() {
      try {
        const v = localStorage.getItem(`lathe.${key}`);
        return v === null ? fallback : JSON.parse(v);
      } catch {
        return fallback;
      }
    },
    set(v) {
      try {
        localStorage.setItem(`lathe.${key}`, JSON.stringify(v));
      } catch {
        // storage full or disabled: the preference lasts this page only
      }
    },
  };
}

/** THEMES are the theme toggle's choices, in its order. */
export const THEMES = ['system', 'light', 'dark'];

const themePref = persisted('theme', 'system');
const osDark = typeof matchMedia === 'function' ? matchMedia('(prefers-color-scheme: dark)') : null;
const themeListeners = new Set();

/**
 * darkMode says whether the workbench is dark now: the theme toggle's
 * choice, or the OS's setting under "system". Its `change` event fires on
 * either change, as a media query's would.
 */
export const darkMode = {
  get matches() {
    const t = themePref.get();
    return t === 'dark' || (t !== 'light' && !!osDark?.matches);
  },
  addEventListener(type, fn) {
    if (type === 'change') themeListeners.add(fn);
  },
};
osDark?.addEventListener('change', () => { for (const fn of themeListeners) fn(); });

/** theme is the toggle's choice: 'system', 'light' or 'dark'. */
export function theme() {
  const t = themePref.get();
  return THEMES.includes(t) ? t : 'system';
}

/** setTheme remembers the choice and applies it to the document. */
export function setTheme(t) {
  themePref.set(t);
  applyTheme();
  for (const fn of themeListeners) fn();
}

/** applyTheme pins the document's colour scheme to the choice (none for "system"). */
export function applyTheme() {
  if (typeof document === 'undefined') return;
  const t = theme();
  if (t === 'system') delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = t;
}

/**
 * copyText puts text on the clipboard and says so in a toast (what names
 * it). Without the Clipboard API (an insecure origin) it falls back to a
 * hidden textarea and the copy command.
 */
export async function copyText(app, text, what = 'Text') {
  try {
    if (navigator.clipboard?.writeText) await navigator.clipboard.writeText(text);
    else fallbackCopy(text);
    app.toast(`${what} copied.`);
  } catch {
    try {
      fallbackCopy(text);
      app.toast(`${what} copied.`);
    } catch (err) {
      app.toast(`Could not copy: ${err.message}`, 'error');
    }
  }
}

function fallbackCopy(text) {
  const ta = document.createElement('textarea');
  ta.value = text;
  ta.setAttribute('readonly', '');
  ta.style.cssText = 'position:fixed;top:0;left:0;opacity:0';
  document.body.append(ta);
  ta.select();
  const ok = document.execCommand('copy');
  ta.remove();
  if (!ok) throw new Error('the browser refused');
}

/** exportName is "<session name>-<YYYY-MM-DD>.<ext>", safe as a file name. */
export function exportName(name, date, ext) {
  const base = String(name || 'session').normalize('NFKC').replace(/[\\/:*?"<>|\x00-\x1f]+/g, '-').replace(/\s+/g, ' ').trim().replace(/^-+|-+$/g, '').slice(0, 80) || 'session';
  const d = date instanceof Date && !Number.isNaN(date.getTime()) ? date : new Date();
  const ymd = `${d.getFullYear()}-${String(d.getMonth() + 1).padStart(2, '0')}-${String(d.getDate()).padStart(2, '0')}`;
  return `${base}-${ymd}.${ext}`;
}

/**
 * initials are what the icon rail shows of a Session beside its state dot:
 * the first letters of its first two words (its first two letters for one
 * word); the link's title has the whole name.
 */
export function initials(name) {
  const words = String(name || '').trim().split(/[\s_\-./]+/).filter(Boolean);
  if (!words.length) return '?';
  const two = words.length > 1 ? words[0][0] + words[1][0] : words[0].slice(0, 2);
  return two.toUpperCase();
}
