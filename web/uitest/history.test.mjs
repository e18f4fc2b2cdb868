// The History view's pure rules (ui/historyrules.js).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { actorText, groupByTurn, kindQuery, KINDS, scrubSeq, shortHash } from '../ui/historyrules.js';

test('a turn groups its consecutive entries; others stand alone, in seq order', () => {
  const e = (seq, turn) => ({ seq, turn_id: turn });
  const groups = groupByTurn([e(1), e(2, 'T1'), e(3, 'T1'), e(4), e(5, 'T1'), e(6, 'T2')]);
  assert.deepEqual(groups.map((g) => [g.turn, g.entries.map((x) => x.seq)]), [
    [null, [1]], ['T1', [2, 3]], [null, [4]], ['T1', [5]], ['T2', [6]],
  ]);
  assert.deepEqual(groupByTurn([]), []);
});

test('actors read as operator · key name, Agent, or system', () => {
  assert.equal(actorText({ kind: 'operator', id: 'abc123' }, { abc123: 'laptop' }), 'operator · laptop');
  assert.equal(actorText({ kind: 'operator', id: 'abc123' }), 'operator · abc123');
  assert.equal(actorText({ kind: 'operator', id: 'loopback' }), 'operator · this machine');
  assert.equal(actorText({ kind: 'agent', id: 'coder', run: 'T1' }), 'Agent · coder');
  assert.equal(actorText({ kind: 'system', id: 'lathe' }), 'system');
  assert.equal(actorText(undefined), 'unknown');
});

test('the kind filter asks for the chosen kinds, and for all when all or none are chosen', () => {
  assert.equal(kindQuery(new Set(['turn', 'git'])), 'turn,git');
  assert.equal(kindQuery(new Set(KINDS)), '');
  assert.equal(kindQuery(new Set()), '');
});

test('the scrubber maps its position onto the loaded entries, clamped', () => {
  const entries = [{ seq: 4 }, { seq: 9 }, { seq: 12 }];
  assert.equal(scrubSeq(entries, 0), 4);
  assert.equal(scrubSeq(entries, 1.4), 9);
  assert.equal(scrubSeq(entries, 7), 12);
  assert.equal(scrubSeq(entries, -2), 4);
  assert.equal(scrubSeq([], 0), null);
});

test('a hash is shortened to its ends', () => {
  assert.equal(shortHash('0123456789abcdef0123456789abcdef'), '01234567…89abcdef');
  assert.equal(shortHash('short'), 'short');
  assert.equal(shortHash(undefined), '');
});

import { delayTo, replayState, restoreNote } from '../ui/historyrules.js';

test('a replay folds into text, reasoning, paired tool calls and the end', () => {
  const frames = [
    { offset_ms: 0, frame: { kind: 'session-accepted' } },
    { offset_ms: 10, frame: { kind: 'session-start' } },
    { offset_ms: 20, frame: { kind: 'reasoning', delta: 'look' } },
    { offset_ms: 30, frame: { kind: 'tool-call', phase: 'start', call_id: 'c', occurrence: 0, name: 'read', arguments: {} } },
    { offset_ms: 80, frame: { kind: 'tool-call', phase: 'result', call_id: 'c', occurrence: 0, result: 'x', is_error: false, duration_ms: 50 } },
    { offset_ms: 90, frame: { kind: 'token', delta: 'done' } },
    { offset_ms: 95, frame: { kind: 'session-done' } },
  ];
  const half = replayState(frames.slice(0, 4));
  assert.deepEqual(half.items.map((x) => x.kind), ['reasoning', 'call']);
  assert.equal(half.items[1].done, false);
  assert.equal(half.end, null);
  const all = replayState(frames);
  assert.deepEqual(all.items.map((x) => [x.kind, x.text ?? x.name]), [['reasoning', 'look'], ['call', 'read'], ['token', 'done']]);
  assert.deepEqual([all.items[1].done, all.items[1].result, all.items[1].ms], [true, 'x', 50]);
  assert.equal(all.end, 'session-done');
  assert.equal(delayTo(frames, 4, 1), 50);
  assert.equal(delayTo(frames, 4, 10), 5);
  assert.equal(delayTo(frames, 0, 2), 0);
});

test('a restore names the files and the side before it writes', () => {
  assert.match(restoreNote(['a.go'], 'before'), /Write a\.go back as they were before this turn/);
  assert.match(restoreNote(['a', 'b', 'c', 'd'], 'after'), /4 files \(a, b, c, …\).*after this turn/);
});

test('Restore does not pre-select generated files; turns are named by their words', async () => {
  const { generatedPath, turnName } = await import('../ui/historyrules.js');
  for (const p of ['__pycache__/calc.cpython-312.pyc', 'src/__pycache__/x.pyc', 'a.pyc', 'node_modules/x/index.js', 'build/out.o']) assert.ok(generatedPath(p), p);
  for (const p of ['calc.py', 'src/builder.go', 'docs/build.md']) assert.ok(!generatedPath(p), p);
  assert.equal(turnName('fix the flaky test in calc please now and then', '14:02'), '“fix the flaky test in calc…” · 14:02');
  assert.equal(turnName('', ''), 'A turn');
});
