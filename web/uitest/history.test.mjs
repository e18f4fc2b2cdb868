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
