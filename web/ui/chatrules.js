// The Chats' and the shared file store's pure rules: what a Chat frame does
// to the streamed turn, how usage reads, tags typed as text, and what a
// refused delete means. No DOM, no network: web/uitest drives them.

/** TERMINAL are the Chat frames that end a turn (exactly one per turn). */
export const TERMINAL = new Set(['chat-done', 'chat-stopped', 'chat-error']);

/** newStream is a turn being sent: the user's text, nothing streamed yet. */
export function newStream(content) {
  return { turnId: '', content, status: 'sending', text: '', reasoning: '', tools: [], error: '', usage: null };
}

/**
 * applyChatFrame folds one Chat frame into the chat's stream (streams:
 * chat id → stream) and reports whether it ended the turn. A refused turn
 * (a chat-error with no turn_id) ends the stream being sent.
 */
export function applyChatFrame(streams, f) {
  let st = streams.get(f.chat_id);
  if (!st) {
    if (f.kind !== 'chat-start') return false;
    st = newStream('');
    streams.set(f.chat_id, st);
  }
  if (st.turnId && f.turn_id && f.turn_id !== st.turnId) return false; // another turn's late frame
  switch (f.kind) {
    case 'chat-start':
      st.turnId = f.turn_id;
      st.status = 'running';
      break;
    case 'chat-token':
      st.text += f.delta;
      break;
    case 'chat-reasoning':
      st.reasoning += f.delta;
      break;
    case 'chat-tool-start':
      st.tools.push({ callId: f.call_id, name: f.name, arguments: f.arguments, result: null, isError: false });
      break;
    case 'chat-tool-result': {
      const t = [...st.tools].reverse().find((x) => x.callId === f.call_id && x.result === null);
      if (t) {
        t.result = f.result;
        t.isError = !!f.is_error;
      }
      break;
    }
    default:
      if (!TERMINAL.has(f.kind)) return false;
      st.status = f.kind.slice('chat-'.length);
      st.error = f.error || '';
      st.usage = usageOf(f);
      return true;
  }
  return false;
}

function usageOf(f) {
  return {
    input_tokens: f.input_tokens || 0, output_tokens: f.output_tokens || 0, reasoning_tokens: f.reasoning_tokens || 0,
    total_tokens: f.total_tokens || 0, token_usage_known: f.token_usage_known !== false,
  };
}

/** usageWords says a usage in words; an unknown count is a lower bound ("≥"). */
export function usageWords(u) {
  if (!u) return '';
  const n = (x) => (x || 0).toLocaleString('en-US');
  const total = `${u.token_usage_known ? '' : '≥ '}${n(u.total_tokens)} tokens`;
  return `${total} (in ${n(u.input_tokens)} · out ${n(u.output_tokens)}${u.reasoning_tokens ? ` · reasoning ${n(u.reasoning_tokens)}` : ''})`;
}

/** parseTags reads tags typed as "a, b,c": trimmed, unique, in order. */
export function parseTags(text) {
  const out = [];
  for (const t of String(text || '').split(',')) {
    const v = t.trim();
    if (v && !out.includes(v)) out.push(v);
  }
  return out;
}

/**
 * deleteRefusal explains a refused delete of a shared file: a 409 means a
 * turn used it as context, and that history keeps it.
 */
export function deleteRefusal(err) {
  if (err && err.status === 409) {
    return 'Kept: a turn used this file as context, and that history needs it, so it cannot be deleted. A Chat can still let go of it; it stays here.';
  }
  return err ? err.message : '';
}

/**
 * forkPlan is what forking at message index does: the new Chat keeps the
 * messages before it; forking at a user message puts that message back in
 * the composer, to edit and send again.
 */
export function forkPlan(chat, index) {
  const m = chat.messages[index];
  return { body: { truncate_at: index }, prefill: m && m.role === 'user' ? m.content : '' };
}

/** overridePatch is the PATCH of the overrides form: an empty field clears (null). */
export function overridePatch(system, model) {
  const v = (s) => (String(s || '').trim() === '' ? null : String(s));
  return { system_override: v(system), model_override: v(model) === null ? null : String(model).trim() };
}

/** contentText is a message's content as text ({"$blob": …} references show their preview). */
export function contentText(c) {
  if (typeof c === 'string') return c;
  if (c && c.$blob) return c.$blob.preview || '';
  return '';
}

/**
 * settledBy reports whether a read of the Chat's record settles its
 * stream: the turn ended and the record holds its reply (a turn refused
 * before it started has none to wait for). A stream still sending or
 * running, or one whose reply a record read before the end lacks, stays.
 */
export function settledBy(chat, st) {
  if (!st || st.status === 'sending' || st.status === 'running') return false;
  if (!st.turnId) return true;
  return (chat.messages || []).some((m) => m.turn_id === st.turnId && m.role === 'assistant');
}

/** streamedHere reports whether a record's message belongs to the turn the stream shows live (shown once, by the stream). */
export function streamedHere(msg, st) {
  return !!(st && st.turnId && msg.turn_id === st.turnId);
}

/**
 * chatStub is the Chat being opened until its record lands: what the list
 * knows of it (info, or only its id), with no messages yet. The composer
 * and a send already belong to it, never to the Chat shown before.
 */
export function chatStub(id, info) {
  return { name: '', agent_id: '', message_count: 0, ...(info || {}), id, messages: [], attachments: [], loading: true };
}

/**
 * withStreamed is the chat with the turn the stream showed as its last two
 * messages (replacing the record's copy of its user message), until a read
 * holding its reply lands: a turn that ended here stays in view when the
 * next one is sent before that read.
 */
export function withStreamed(chat, st) {
  const own = (chat.messages || []).filter((m) => m.turn_id !== st.turnId);
  const reply = {
    role: 'assistant', content: st.text, turn_id: st.turnId, outcome: st.status, error: st.error, usage: st.usage, reasoning: st.reasoning,
    tool_calls: st.tools.map((t) => ({ call_id: t.callId, name: t.name, arguments: t.arguments, result: t.result, is_error: t.isError })),
  };
  return { ...chat, messages: [...own, { role: 'user', content: st.content, turn_id: st.turnId }, reply] };
}

/**
 * tookTurn reports whether a Chat's record shows it took the message text:
 * a turn runs, or its last user message is that text. A message sent just
 * before the connection went, that the record does not show, goes back to
 * the box.
 */
export function tookTurn(chat, text) {
  if (chat.active_turn) return true;
  const last = (chat.messages || []).findLast((m) => m.role === 'user');
  return !!last && contentText(last.content) === text;
}
