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

/** darkMode is the OS colour-scheme query. */
export const darkMode = typeof matchMedia === 'function' ? matchMedia('(prefers-color-scheme: dark)') : null;
