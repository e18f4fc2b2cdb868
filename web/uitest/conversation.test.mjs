// The conversation's pure rules: Markdown sanitising (ui/markdown.js over
// the vendored bundle), what tool cards say (ui/toolcard.js), usage and
// cost in words (ui/store.js), export names, the connection in words, and
// the pane sizes.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MarkdownIt, hljs } from '../vendor/dist/markdown.js';
import { createMarkdown, safeURL } from '../ui/markdown.js';
import { toolSummary, shellResult, editDiff } from '../ui/toolcard.js';
import * as S from '../ui/store.js';
import { exportName } from '../ui/util.js';
import { clampSize, CONVERSATION_MIN } from '../ui/sizes.js';

const md = createMarkdown({ MarkdownIt, hljs });

test('Markdown: headings, lists, tables, links and highlighted code with a Copy button', () => {
  const out = md('# Title\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nprint("x")\n```\n\nsee https://example.com/a');
  assert.match(out, /<h1>Title<\/h1>/);
  assert.match(out, /<ul>\s*<li>one<\/li>/);
  assert.match(out, /<div class="table-wrap"><table>/);
  assert.match(out, /<span class="hljs-built_in">print<\/span>/);
  assert.match(out, /<button type="button" class="link small copy-code" aria-label="Copy the python code">Copy<\/button>/);
  assert.match(out, /<a href="https:\/\/example.com\/a" target="_blank" rel="noopener noreferrer">/);
});

test('Markdown: model output cannot bring HTML, script or unsafe links', () => {
  const out = md('<script>alert(1)</script> <img src=x onerror=alert(1)> <a href="javascript:alert(1)">x</a>\n\n' +
    '[js](javascript:alert(1)) [data](data:text/html;base64,PHNjcmlwdD4=) [vb](vbscript:x) [file](file:///etc/passwd) [rel](/api/sessions)\n\n' +
    '![img](https://tracker.example/p.png) [ok](mailto:a@example.com)');
  assert.doesNotMatch(out, /<script|<img|<a href="javascript|<[^>]*onerror/i);
  assert.match(out, /&lt;script&gt;/, 'raw HTML is shown as text');
  for (const bad of ['javascript:', 'data:', 'vbscript:', 'file:', '/api/sessions']) {
    assert.doesNotMatch(out, new RegExp(`href="${bad}`), bad);
  }
  assert.doesNotMatch(out, /<img/, 'an image stays a link: the page loads nothing a model names');
  assert.match(out, /<a href="https:\/\/tracker.example\/p.png" target="_blank" rel="noopener noreferrer">img<\/a>/);
  assert.match(out, /<a href="mailto:a@example.com" target="_blank" rel="noopener noreferrer">ok<\/a>/);
  assert.equal(safeURL(' JavaScript:alert(1)'), false);
  assert.equal(safeURL('HTTPS://x'), true);
});

test('Markdown: an unknown fence language is escaped, not highlighted', () => {
  const out = md('```nosuchlang\n<b>x</b>\n```');
  assert.match(out, /&lt;b&gt;x&lt;\/b&gt;/);
  assert.match(out, /class="code-lang">nosuchlang</);
});

test('tool cards say what they did, collapsed', () => {
  const done = (name, args, result, is_error = false) => ({ name, arguments: JSON.stringify(args), result, is_error, phase: 'result' });
  assert.equal(toolSummary(done('write_file', { path: 'greet.py', content: 'x' }, 'wrote')).title, 'write_file greet.py');
  assert.equal(toolSummary(done('shell', { command: 'python3 -m pytest' }, 'F\n[exit code 1]', true)).title, 'run python3 -m pytest (exit 1)');
  assert.equal(toolSummary(done('shell', { command: 'sleep 99' }, '[timed out after 1s; the command and its children were killed with SIGKILL]', true)).title, 'run sleep 99 (timed out)');
  assert.equal(toolSummary({ name: 'shell', arguments: '{"command":"ls', phase: 'start' }).title, 'run …', 'arguments still streaming');
  assert.equal(toolSummary(done('edit_file', { path: 'a.go', old_string: 'a', new_string: 'b' }, 'ok')).kind, 'edit');
  assert.equal(toolSummary(done('read_file', { path: 'missing.txt' }, 'no such file', true)).title, 'read_file missing.txt');
  assert.equal(toolSummary(done('search', { pattern: 'TODO', path: 'src' }, '')).title, 'search "TODO" in src');
  assert.equal(toolSummary(done('fetch_url', { url: 'https://x' }, '')).title, 'fetch_url https://x');
  assert.equal(toolSummary(done('noargs', {}, '')).title, 'noargs');
});

test('a shell result splits into its output and its exit', () => {
  assert.deepEqual(shellResult('hi\n[exit code 0]'), { output: 'hi', exit: 0, ended: 'exit 0' });
  assert.deepEqual(shellResult('plain'), { output: 'plain', exit: null, ended: '' });
  assert.equal(shellResult('x\n[not completed: sandbox gone]').ended, 'not completed');
});

test('an edit is a diff: the old lines removed, the new added', () => {
  assert.deepEqual(editDiff('{"path":"a","old_string":"a\\nb","new_string":"c\\n"}'),
    [{ op: '-', text: 'a' }, { op: '-', text: 'b' }, { op: '+', text: 'c' }]);
  assert.deepEqual(editDiff('not json'), []);
});

test('cost reads honestly: unknown is "cost unknown", never "at least $0"', () => {
  const rec = (u) => S.tokensOf(u);
  assert.equal(S.usageLine(rec({ input_tokens: 10, output_tokens: 5, total_tokens: 15, cost_usd: 0.0012, cost_known: true })), '15 tokens · $0.0012');
  assert.equal(S.usageLine(rec({ input_tokens: 10, total_tokens: 10, cost_usd: 0, cost_known: false })), '10 tokens · cost unknown');
  assert.equal(S.usageLine(rec({ input_tokens: 10, total_tokens: 10, cost_usd: 0.5, cost_known: false })), '10 tokens · at least $0.50');
  assert.equal(S.usageLine(rec({ input_tokens: 10, total_tokens: 10 })), '10 tokens', 'a frame says nothing of price');
  assert.equal(S.usageLine(rec({ token_usage_known: false })), '', 'a Stop before any usage has no line');
  assert.equal(S.usageLine(rec({ input_tokens: 3, total_tokens: 3, token_usage_known: false })), 'at least 3 tokens');
  assert.equal(S.usageLine(null), '');
  assert.equal(rec({ input_tokens: 10, output_tokens: 5, reasoning_tokens: 3 }).total, 15, 'reasoning is inside output, never added on top');
});

test('a Session sums only the usage there is', () => {
  const st = S.createState();
  S.loadTurns(st, 's1', [
    { turn_id: 't1', status: 'done', usage: { input_tokens: 10, total_tokens: 10, cost_usd: 0, cost_known: false, token_usage_known: true } },
    { turn_id: 't2', status: 'cancelled', usage: { total_tokens: 0, token_usage_known: false, cost_usd: 0, cost_known: true } },
  ]);
  const sum = S.sessionTokens(st, 's1');
  assert.equal(sum.any, true);
  assert.equal(S.usageLine(sum), '10 tokens · cost unknown');
  const st2 = S.createState();
  S.loadTurns(st2, 's1', [{ turn_id: 't2', status: 'cancelled', usage: { total_tokens: 0, token_usage_known: false } }]);
  assert.equal(S.sessionTokens(st2, 's1').any, false, 'no "at least 0 tokens" in the header');
});

test('export names use the Session name and date', () => {
  const d = new Date(2026, 10, 24, 12);
  assert.equal(exportName('fix the flaky test', d, 'md'), 'fix the flaky test-2026-11-24.md');
  assert.equal(exportName('a/b:c*?', d, 'json'), 'a-b-c-2026-11-24.json');
  assert.equal(exportName('', d, 'md'), 'session-2026-11-24.md');
});

test('offline: the environment badge is unknown, the rail says Reconnecting… in words', () => {
  const s = { id: 's1', status: 'open', environment: { state: 'ready' } };
  const st = S.createState();
  assert.deepEqual(S.sessionBadge(st, s, 'offline'), { state: 'unknown', label: 'unknown (offline)' });
  assert.equal(S.sessionBadge(st, s, 'live').label, 'Ready');
  assert.deepEqual(S.connWords({ reason: 'closed (1006)' }), { text: 'Reconnecting…', why: 'the connection dropped' });
  assert.equal(S.connWords({ reason: 'closed (4999)' }).why, 'the connection closed');
  assert.equal(S.connWords({ reason: 'stopped' }).why, 'disconnected');
  assert.doesNotMatch(JSON.stringify(S.connWords({ reason: '1011' })), /1011/);
});

test('pane sizes keep the conversation its width', () => {
  assert.equal(clampSize('insp', 900, { width: 1024, height: 800 }), 1024 - CONVERSATION_MIN - 52);
  assert.equal(clampSize('insp', 100, { width: 1600, height: 800 }), 300);
  assert.equal(clampSize('dock', 2000, { width: 1280, height: 800 }), 480);
  assert.equal(clampSize('rail', NaN, { width: 1280, height: 800 }), 180);
});

test('the Files tree marks changed paths by letter and word, and their folders', async () => {
  const { gitMarks, dirChanged } = await import('../ui/treemarks.js');
  const m = gitMarks([
    { path: 'a.txt', unstaged: 'modified' },
    { path: 'src/new.go', unstaged: 'untracked' },
    { path: 'b.txt', staged: 'added' },
    { path: 'c.txt', conflict: true, unstaged: 'modified' },
  ]);
  assert.deepEqual(m.get('a.txt'), { mark: 'M', word: 'modified' });
  assert.deepEqual(m.get('src/new.go'), { mark: 'U', word: 'untracked' });
  assert.deepEqual(m.get('b.txt'), { mark: 'A', word: 'added' });
  assert.deepEqual(m.get('c.txt'), { mark: '!', word: 'in conflict' });
  assert.equal(dirChanged(m, 'src'), true);
  assert.equal(dirChanged(m, 'sr'), false);
  assert.equal(dirChanged(null, 'src'), false);
});
