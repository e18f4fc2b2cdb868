// Deep links: #/sessions/<id>, #/sessions/<id>/files/<path>,
// #/sessions/<id>/environment and #/sessions/<id>/git survive a reload, and
// so does #/mcp, the MCP panel in the centre, #/automations[/<id>], and
// #/chats[/<id>] and #/files, the Chats and the shared file store.

/** parseRoute reads a location hash. */
export function parseRoute(hash) {
  const h = (hash || '').replace(/^#\/?/, '');
  const parts = h.split('/');
  if (parts[0] === 'mcp') return { session: null, tool: null, file: null, view: 'mcp' };
  if (parts[0] === 'automations') return { session: null, tool: null, file: null, view: 'automations', automation: parts[1] ? safeDecode(parts[1]) : null };
  if (parts[0] === 'chats') return { session: null, tool: null, file: null, view: 'chats', chat: parts[1] ? safeDecode(parts[1]) : null };
  if (parts[0] === 'files') return { session: null, tool: null, file: null, view: 'files' };
  if (parts[0] !== 'sessions' || !parts[1]) return { session: null, tool: null, file: null };
  const session = safeDecode(parts[1]);
  const tool = parts[2] || null;
  if (tool === 'files' && parts.length > 3) {
    return { session, tool, file: parts.slice(3).map(safeDecode).join('/') };
  }
  return { session, tool, file: null };
}

/** routeHash builds the hash of a route. */
export function routeHash({ session, tool, file, view, automation, chat }) {
  if (view === 'mcp') return '#/mcp';
  if (view === 'automations') return automation ? `#/automations/${encodeURIComponent(automation)}` : '#/automations';
  if (view === 'chats') return chat ? `#/chats/${encodeURIComponent(chat)}` : '#/chats';
  if (view === 'files') return '#/files';
  if (!session) return '#/';
  let h = `#/sessions/${encodeURIComponent(session)}`;
  if (tool) h += `/${tool}`;
  if (tool === 'files' && file) h += `/${file.split('/').map(encodeURIComponent).join('/')}`;
  return h;
}

function safeDecode(s) {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
