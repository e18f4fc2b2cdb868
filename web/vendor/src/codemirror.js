// CodeMirror 6: the Files editor. Loaded when the first file opens; each
// language is a chunk of its own, loaded when a file needs it.
export { EditorView, keymap } from '@codemirror/view';
export { EditorState, Compartment } from '@codemirror/state';
export { basicSetup } from 'codemirror';
export { oneDark } from '@codemirror/theme-one-dark';

// languages maps a file extension to a loader of its language support.
const js = (o) => () => import('@codemirror/lang-javascript').then((m) => m.javascript(o));
const shell = () => Promise.all([import('@codemirror/language'), import('@codemirror/legacy-modes/mode/shell')])
  .then(([l, m]) => l.StreamLanguage.define(m.shell));
export const languages = {
  js: js({}), mjs: js({}), cjs: js({}), jsx: js({ jsx: true }),
  ts: js({ typescript: true }), mts: js({ typescript: true }), tsx: js({ typescript: true, jsx: true }),
  json: () => import('@codemirror/lang-json').then((m) => m.json()),
  py: () => import('@codemirror/lang-python').then((m) => m.python()),
  go: () => import('@codemirror/lang-go').then((m) => m.go()),
  rs: () => import('@codemirror/lang-rust').then((m) => m.rust()),
  md: () => import('@codemirror/lang-markdown').then((m) => m.markdown()),
  css: () => import('@codemirror/lang-css').then((m) => m.css()),
  html: () => import('@codemirror/lang-html').then((m) => m.html()),
  htm: () => import('@codemirror/lang-html').then((m) => m.html()),
  yaml: () => import('@codemirror/lang-yaml').then((m) => m.yaml()),
  yml: () => import('@codemirror/lang-yaml').then((m) => m.yaml()),
  sh: shell, bash: shell,
};
