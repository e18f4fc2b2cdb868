// Markdown in Agent messages. Model output is untrusted: the parser emits no
// raw HTML (markdown-it's html: false escapes it), links keep only http,
// https and mailto targets and open in a new tab without an opener or a
// referrer, images stay links (the page loads nothing a model names), and
// the browser runs DOMPurify over the result as a second wall. Code blocks
// are highlighted and carry a Copy button.
//
// This module is pure: the libraries come in as arguments (the vendored
// /vendor/markdown.js bundle in the browser, the same file in web/uitest).

/** SAFE_URL is the only link targets an Agent message keeps. */
export const SAFE_URL = /^(?:https?:|mailto:)/i;

/** safeURL reports whether a link target may be followed. */
export function safeURL(url) {
  return SAFE_URL.test(String(url).trim());
}

/** createMarkdown returns render(text) → HTML for the given libraries. */
export function createMarkdown({ MarkdownIt, hljs, DOMPurify = null }) {
  const md = new MarkdownIt({
    html: false,
    linkify: true,
    typographer: false,
    highlight: (code, lang) => {
      const name = lang && hljs.getLanguage(lang) ? lang : '';
      if (!name) return ''; // markdown-it escapes it
      try {
        return hljs.highlight(code, { language: name, ignoreIllegals: true }).value;
      } catch {
        return '';
      }
    },
  });
  md.disable('image');
  md.validateLink = safeURL;
  md.linkify.set({ fuzzyLink: false, fuzzyEmail: false });

  const rules = md.renderer.rules;
  rules.link_open = (tokens, i, options, env, self) => {
    tokens[i].attrSet('target', '_blank');
    tokens[i].attrSet('rel', 'noopener noreferrer');
    return self.renderToken(tokens, i, options);
  };
  const fence = rules.fence;
  rules.fence = (tokens, i, options, env, self) => {
    const lang = tokens[i].info.trim().split(/\s+/)[0] || '';
    const label = lang ? md.utils.escapeHtml(lang) : 'text';
    return `<div class="code-block"><div class="code-head"><span class="code-lang">${label}</span>` +
      `<button type="button" class="link small copy-code" aria-label="Copy the ${label} code">Copy</button></div>` +
      `${fence(tokens, i, options, env, self)}</div>`;
  };
  const table = rules.table_open || ((tokens, i, options, env, self) => self.renderToken(tokens, i, options));
  rules.table_open = (tokens, i, options, env, self) => `<div class="table-wrap">${table(tokens, i, options, env, self)}`;
  rules.table_close = (tokens, i, options, env, self) => `${self.renderToken(tokens, i, options)}</div>`;

  if (DOMPurify?.isSupported) {
    DOMPurify.addHook('afterSanitizeAttributes', (node) => {
      if (node.tagName === 'A') {
        if (!safeURL(node.getAttribute('href') || '')) node.removeAttribute('href');
        node.setAttribute('target', '_blank');
        node.setAttribute('rel', 'noopener noreferrer');
      }
    });
  }
  const purify = DOMPurify?.isSupported
    ? (s) => DOMPurify.sanitize(s, {
      ALLOWED_TAGS: ['a', 'b', 'blockquote', 'br', 'button', 'code', 'del', 'div', 'em', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6',
        'hr', 'i', 'li', 'ol', 'p', 'pre', 's', 'span', 'strong', 'table', 'tbody', 'td', 'th', 'thead', 'tr', 'ul'],
      ALLOWED_ATTR: ['href', 'title', 'class', 'target', 'rel', 'type', 'start', 'aria-label'],
      ALLOWED_URI_REGEXP: SAFE_URL,
      FORBID_ATTR: ['id', 'name'],
    })
    : (s) => s;
  return (text) => purify(md.render(String(text || '')).trim());
}
