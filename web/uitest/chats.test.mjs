import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyChatFrame, newStream, usageWords, parseTags, deleteRefusal, forkPlan, overridePatch, contentText, settledBy, streamedHere, chatStub, withStreamed, tookTurn } from '../ui/chatrules.js';

test('a Chat turn streams into one stream and ends once', () => {
  const streams = new Map([['C', newStream('hi')]]);
  const frames = [
    { kind: 'chat-start', chat_id: 'C', turn_id: 'T', agent: 'a' },
    { kind: 'chat-reasoning', chat_id: 'C', turn_id: 'T', delta: 'hmm' },
    { kind: 'chat-token', chat_id: 'C', turn_id: 'T', delta: 'hello ' },
    { kind: 'chat-tool-start', chat_id: 'C', turn_id: 'T', call_id: 'c1', name: 'mcp__t__echo', arguments: { text: 'x' } },
    { kind: 'chat-tool-result', chat_id: 'C', turn_id: 'T', call_id: 'c1', name: 'mcp__t__echo', result: 'x', is_error: false },
    { kind: 'chat-token', chat_id: 'C', turn_id: 'OTHER', delta: 'late' },
    { kind: 'chat-token', chat_id: 'C', turn_id: 'T', delta: 'world' },
  ];
  for (const f of frames) assert.equal(applyChatFrame(streams, f), false);
  const st = streams.get('C');
  assert.equal(st.text, 'hello world');
  assert.equal(st.reasoning, 'hmm');
  assert.deepEqual(st.tools.map((t) => [t.name, t.result]), [['mcp__t__echo', 'x']]);
  assert.equal(applyChatFrame(streams, { kind: 'chat-done', chat_id: 'C', turn_id: 'T', input_tokens: 10, output_tokens: 4, reasoning_tokens: 1, total_tokens: 15, token_usage_known: true }), true);
  assert.equal(st.status, 'done');
  assert.equal(usageWords(st.usage), '15 tokens (in 10 · out 4 · reasoning 1)');
});

test('a refused turn ends the stream being sent; an unknown count is a lower bound', () => {
  const streams = new Map([['C', newStream('again')]]);
  assert.equal(applyChatFrame(streams, { kind: 'chat-error', chat_id: 'C', turn_id: '', error: 'chat "C" is busy', total_tokens: 0, token_usage_known: true }), true);
  assert.equal(streams.get('C').status, 'error');
  assert.match(streams.get('C').error, /busy/);
  assert.equal(applyChatFrame(new Map(), { kind: 'chat-token', chat_id: 'X', turn_id: 'T', delta: 'x' }), false);
  assert.equal(usageWords({ input_tokens: 1200, output_tokens: 34, total_tokens: 1234, token_usage_known: false }), '≥ 1,234 tokens (in 1,200 · out 34)');
});

test('tags, refusals, forks and overrides', () => {
  assert.deepEqual(parseTags(' a, b,,a , c d '), ['a', 'b', 'c d']);
  assert.match(deleteRefusal({ status: 409, message: 'retained' }), /a turn used this file as context/);
  assert.equal(deleteRefusal({ status: 500, message: 'boom' }), 'boom');
  const chat = { messages: [{ role: 'user', content: 'q' }, { role: 'assistant', content: 'a' }] };
  assert.deepEqual(forkPlan(chat, 0), { body: { truncate_at: 0 }, prefill: 'q' });
  assert.deepEqual(forkPlan(chat, 1), { body: { truncate_at: 1 }, prefill: '' });
  assert.deepEqual(overridePatch('  ', ''), { system_override: null, model_override: null });
  assert.deepEqual(overridePatch('be brief', ' m9 '), { system_override: 'be brief', model_override: 'm9' });
  assert.equal(contentText({ $blob: { sha256: 'x', size: 9, preview: 'pre' } }), 'pre');
});

test('a record read merges with the turn streaming here: settled only by its reply, shown once', () => {
  const st = newStream('hi');
  const before = { messages: [{ role: 'user', content: 'old', turn_id: 'T0' }, { role: 'assistant', content: 'ok', turn_id: 'T0' }] };
  assert.equal(settledBy(before, st), false, 'a turn being sent outlives a read');
  applyChatFrame(new Map([['C', st]]), { kind: 'chat-start', chat_id: 'C', turn_id: 'T' });
  const running = { messages: [...before.messages, { role: 'user', content: 'hi', turn_id: 'T' }] };
  assert.equal(settledBy(running, st), false, 'a running turn outlives a read');
  assert.deepEqual(running.messages.map((m) => streamedHere(m, st)), [false, false, true], 'the stream shows its own message');
  st.status = 'done';
  assert.equal(settledBy(running, st), false, 'a read from before the end lacks the reply');
  assert.equal(settledBy({ messages: [...running.messages, { role: 'assistant', content: 'yo', turn_id: 'T' }] }, st), true);
  const refused = newStream('again');
  refused.status = 'error';
  assert.equal(settledBy(before, refused), true, 'a refused turn has no reply to wait for');
  assert.equal(settledBy(before, undefined), false);
  assert.equal(streamedHere(before.messages[0], refused), false);
});

test('a Chat being opened is a stub of what the list knows, until its record lands', () => {
  assert.deepEqual(chatStub('C', { id: 'C', name: 'Notes', agent_id: 'a', message_count: 2 }),
    { id: 'C', name: 'Notes', agent_id: 'a', message_count: 2, messages: [], attachments: [], loading: true });
  assert.deepEqual(chatStub('C', undefined), { id: 'C', name: '', agent_id: '', message_count: 0, messages: [], attachments: [], loading: true });
});

test('a turn that ended here stays in view as messages until its record lands', () => {
  const streams = new Map([['C', newStream('q2')]]);
  for (const f of [
    { kind: 'chat-start', chat_id: 'C', turn_id: 'T' },
    { kind: 'chat-token', chat_id: 'C', turn_id: 'T', delta: 'a2' },
    { kind: 'chat-done', chat_id: 'C', turn_id: 'T', total_tokens: 3, token_usage_known: true },
  ]) applyChatFrame(streams, f);
  const read = { id: 'C', messages: [{ role: 'user', content: 'q1', turn_id: 'T0' }, { role: 'user', content: 'q2', turn_id: 'T' }] };
  const c = withStreamed(read, streams.get('C'));
  assert.deepEqual(c.messages.map((m) => [m.role, m.content, m.turn_id]), [['user', 'q1', 'T0'], ['user', 'q2', 'T'], ['assistant', 'a2', 'T']]);
  assert.equal(c.messages[2].outcome, 'done');
  assert.equal(read.messages.length, 2, 'the read is not changed');
  assert.equal(settledBy(c, streams.get('C')), true);
});

test('a message sent as the connection went: the record shows whether the Chat took it', () => {
  const msgs = [{ role: 'user', content: 'q1' }, { role: 'assistant', content: 'a1' }];
  assert.equal(tookTurn({ messages: msgs }, 'q2'), false);
  assert.equal(tookTurn({ messages: msgs, active_turn: 'T' }, 'q2'), true, 'its turn runs');
  assert.equal(tookTurn({ messages: [...msgs, { role: 'user', content: 'q2' }, { role: 'assistant', content: 'a2' }] }, 'q2'), true, 'its turn ended');
  assert.equal(tookTurn({ messages: [{ role: 'user', content: { $blob: { preview: 'q2' } } }] }, 'q2'), true);
  assert.equal(tookTurn({ messages: [] }, 'q2'), false);
});
