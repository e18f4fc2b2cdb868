// MCP in words, and the rules of its panel: the four ways to remember an
// approval decision, a saved decision's scope, which saved decisions a
// revoke removes, an install form's request, and an arguments preview made
// readable. Pure: no DOM, no network (web/uitest drives it). The approvals'
// live-state rules are in store.js with the rest of the live state.

/**
 * SCOPES are the persist choices of the mcp-approve command, in the order a
 * prompt offers them, each spelled out for a person.
 */
export const SCOPES = [
  { value: 'once', label: 'only this once' },
  { value: 'agent_tool', label: 'always for this tool, this Agent' },
  { value: 'agent_server', label: 'always for every tool of this server, this Agent' },
  { value: 'any_agent_server', label: 'always for this server, every Agent' },
];

/** scopeLabel is a persist choice's words, or the value itself when unknown. */
export function scopeLabel(value) {
  return SCOPES.find((s) => s.value === value)?.label || value;
}

/**
 * scopeDetail names what a persist choice covers for approval a:
 * "echo of t, for coder".
 */
export function scopeDetail(value, a) {
  const agent = a.agent_id || 'this Agent';
  switch (value) {
    case 'once': return 'this call only; the next one asks again';
    case 'agent_tool': return `${a.tool} of ${a.server}, for ${agent}`;
    case 'agent_server': return `every tool of ${a.server}, for ${agent}`;
    case 'any_agent_server': return `every tool of ${a.server}, for every Agent`;
    default: return '';
  }
}

/**
 * permissionWords says what a saved decision decides, in words:
 * "Allowed: tool echo of server t, for Agent coder".
 */
export function permissionWords(p) {
  const verb = p.decision === 'allow' ? 'Allowed' : p.decision === 'deny' ? 'Denied' : p.decision;
  const what = p.tool ? `tool ${p.tool} of server ${p.server}` : `every tool of server ${p.server}`;
  const who = p.agent_id ? `for Agent ${p.agent_id}` : 'for every Agent';
  return `${verb}: ${what}, ${who}`;
}

/**
 * revokeQuery is the query of the DELETE that revokes saved decision p:
 * its server, and its Agent and tool where it names them.
 */
export function revokeQuery(p) {
  const q = { server: p.server };
  if (p.agent_id) q.agent_id = p.agent_id;
  if (p.tool) q.tool = p.tool;
  return q;
}

/**
 * revokeCovers lists the saved decisions of perms that revoking p removes:
 * the route revokes every decision matching its query, so revoking a
 * server-wide decision also revokes the narrower ones under it.
 */
export function revokeCovers(perms, p) {
  const q = revokeQuery(p);
  return perms.filter((x) => x.server === q.server && (!q.agent_id || x.agent_id === q.agent_id) && (!q.tool || x.tool === q.tool));
}

/**
 * installRequest builds the body of POST /api/mcp/install from a catalog
 * entry and the form's values: {body, missing}, missing naming the
 * required values left empty. Empty optional values are left out, so the
 * server applies its default.
 */
export function installRequest(entry, values = {}, name = '') {
  const body = { slug: entry.slug };
  const missing = [];
  const vals = {};
  for (const v of entry.values || []) {
    const raw = values[v.key] ?? '';
    // A secret is sent as typed; other values lose surrounding spaces.
    const x = v.secret ? raw : raw.trim();
    if (x === '') {
      if (v.required) missing.push(v.key);
      continue;
    }
    vals[v.key] = x;
  }
  if (Object.keys(vals).length) body.values = vals;
  if (name.trim()) body.name = name.trim();
  return { body, missing };
}

/** SERVER_STATES maps a server status onto a badge: {state (CSS), icon, label}. */
const SERVER_STATES = {
  connecting: { state: 'preparing', icon: '◌', label: 'Connecting' },
  connected: { state: 'ready', icon: '●', label: 'Connected' },
  disconnected: { state: 'unprepared', icon: '○', label: 'Disconnected' },
  failed: { state: 'failed', icon: '✕', label: 'Failed' },
};

/** serverBadge is a server status's badge; an unknown status shows as it is. */
export function serverBadge(status) {
  return SERVER_STATES[status] || { state: 'unknown', icon: '?', label: status || 'Unknown' };
}

/**
 * approvalWords says what a server's approval setting means for its calls:
 * always (the default) waits for a decision unless a saved one covers the
 * call; never runs every call without asking.
 */
export function approvalWords(approval) {
  if (approval === 'never') return 'calls run without asking';
  if (!approval || approval === 'always') return 'each call asks, unless a saved decision covers it';
  return `approval ${approval}`;
}

/** FOLD is how many characters of one argument value a preview shows before folding the rest. */
export const FOLD = 240;

/**
 * previewArguments makes an arguments preview readable: JSON pretty-printed
 * with long string values folded ("… 1,234 more characters"), or the text
 * as it came when it is not JSON (the daemon may have cut it short).
 */
export function previewArguments(text) {
  if (!text) return '';
  let v;
  try {
    v = JSON.parse(text);
  } catch {
    return text;
  }
  const fold = (x) => {
    if (typeof x === 'string' && x.length > FOLD) return `${x.slice(0, FOLD)}… ${(x.length - FOLD).toLocaleString('en-US')} more characters`;
    if (Array.isArray(x)) return x.map(fold);
    if (x && typeof x === 'object') return Object.fromEntries(Object.entries(x).map(([k, y]) => [k, fold(y)]));
    return x;
  };
  return JSON.stringify(fold(v), null, 2);
}
