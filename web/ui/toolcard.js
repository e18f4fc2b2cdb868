// What a tool card says about a call, in words: the collapsed one-liner
// ("write_file greet.py", "run python3 -m pytest (exit 1)") and what the
// expanded card shows (a file edit's diff, a shell call's command and
// output). Pure, so web/uitest can hold it to its word.

/** toolArgs parses a call's arguments (a JSON text or an object); {} when they are not an object. */
export function toolArgs(args) {
  if (args && typeof args === 'object') return args;
  if (typeof args !== 'string' || !args.trim()) return {};
  try {
    const v = JSON.parse(args);
    return v && typeof v === 'object' && !Array.isArray(v) ? v : {};
  } catch {
    return {}; // still streaming, or not JSON
  }
}

/** EXIT is the shell tool's last line: "[exit code N]". */
const EXIT = /\n?\[exit code (-?\d+)\]\s*$/;
/** STOPPED is the shell tool's last line when the command did not finish. */
const STOPPED = /\n?\[(timed out after [^\]]*|not completed: [^\]]*)\]\s*$/;

/** shellResult splits a shell call's result into its output and how it ended. */
export function shellResult(result) {
  const text = String(result ?? '');
  let m = EXIT.exec(text);
  if (m) return { output: text.slice(0, m.index), exit: Number(m[1]), ended: `exit ${m[1]}` };
  m = STOPPED.exec(text);
  if (m) return { output: text.slice(0, m.index), exit: null, ended: m[1].startsWith('timed out') ? 'timed out' : 'not completed' };
  return { output: text, exit: null, ended: '' };
}

const oneLine = (s, max = 80) => {
  const line = String(s).replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
};

/**
 * toolSummary describes a call: {kind, title, path, command, state}. kind
 * is 'edit' (edit_file), 'write' (write_file), 'shell', 'read', or 'other';
 * title is the collapsed one-liner; path is the file a file tool touched.
 */
export function toolSummary(c) {
  const a = toolArgs(c.arguments);
  const done = c.phase === 'result';
  const path = typeof a.path === 'string' ? a.path : '';
  switch (c.name) {
    case 'shell': {
      const cmd = typeof a.command === 'string' ? a.command : '';
      const r = done ? shellResult(c.result) : null;
      const end = r?.ended ? ` (${r.ended})` : '';
      return { kind: 'shell', title: `run ${oneLine(cmd) || '…'}${end}`, command: cmd, path: '', exit: r?.exit ?? null };
    }
    case 'write_file':
      return { kind: 'write', title: `write_file ${path || '…'}`, path };
    case 'edit_file':
      return { kind: 'edit', title: `edit_file ${path || '…'}`, path };
    case 'read_file':
      return { kind: 'read', title: `read_file ${path || '…'}`, path };
    case 'list_files':
      return { kind: 'other', title: `list_files ${path || '.'}`, path: '' };
    case 'search': {
      const where = path ? ` in ${path}` : '';
      return { kind: 'other', title: `search ${typeof a.pattern === 'string' ? JSON.stringify(oneLine(a.pattern, 60)) : '…'}${where}`, path: '' };
    }
    default: {
      // An MCP or other tool: its name and its first short string argument.
      const first = Object.values(a).find((v) => typeof v === 'string' && v.trim());
      return { kind: 'other', title: first ? `${c.name} ${oneLine(first, 60)}` : c.name, path: '' };
    }
  }
}

/**
 * editDiff is an edit_file call as diff lines: [{op: '-'|'+', text}], the
 * old text removed and the new text added.
 */
export function editDiff(args) {
  const a = toolArgs(args);
  const lines = (s) => (typeof s === 'string' && s !== '' ? s.replace(/\n$/, '').split('\n') : []);
  return [...lines(a.old_string).map((text) => ({ op: '-', text })), ...lines(a.new_string).map((text) => ({ op: '+', text }))];
}
