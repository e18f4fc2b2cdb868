// Markdown for the conversation: markdown-it to parse, DOMPurify to
// sanitise what it renders, and highlight.js (its core and a few common
// languages) for code blocks. Loaded when the first Agent message renders.
export { default as MarkdownIt } from 'markdown-it';
export { default as DOMPurify } from 'dompurify';
import hljs from 'highlight.js/lib/core';
import bash from 'highlight.js/lib/languages/bash';
import css from 'highlight.js/lib/languages/css';
import diff from 'highlight.js/lib/languages/diff';
import dockerfile from 'highlight.js/lib/languages/dockerfile';
import go from 'highlight.js/lib/languages/go';
import ini from 'highlight.js/lib/languages/ini';
import javascript from 'highlight.js/lib/languages/javascript';
import json from 'highlight.js/lib/languages/json';
import makefile from 'highlight.js/lib/languages/makefile';
import python from 'highlight.js/lib/languages/python';
import rust from 'highlight.js/lib/languages/rust';
import shell from 'highlight.js/lib/languages/shell';
import sql from 'highlight.js/lib/languages/sql';
import typescript from 'highlight.js/lib/languages/typescript';
import xml from 'highlight.js/lib/languages/xml';
import yaml from 'highlight.js/lib/languages/yaml';

for (const [name, lang] of Object.entries({ bash, css, diff, dockerfile, go, ini, javascript, json, makefile, python, rust, shell, sql, typescript, xml, yaml })) {
  hljs.registerLanguage(name, lang);
}
export { hljs };
