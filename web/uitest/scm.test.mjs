// Source Control's pure rules (ui/scmrules.js): the commit request carries
// the status token, a changed checkout is told in words, and the commit
// identity is named with where it comes from.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CHANGED_NOTE, changedSinceRead, commitBody, identityText } from '../ui/scmrules.js';

test('a commit sends the status token it was shown with', () => {
  assert.deepEqual(commitBody('fix it', false, 'tok1'), { message: 'fix it', status_token: 'tok1' });
  assert.deepEqual(commitBody('all', true, 'tok2'), { message: 'all', stage_all: true, status_token: 'tok2' });
});

test('a commit without a token read sends none, never an empty one', () => {
  assert.deepEqual(commitBody('m', false, undefined), { message: 'm' });
  assert.deepEqual(commitBody('m', false, ''), { message: 'm' });
});

test("the daemon's changed-checkout refusal is recognised, other 409s are not", () => {
  assert.ok(changedSinceRead('the checkout changed since its status was read'));
  assert.ok(changedSinceRead('conflict: The checkout changed since its status was read; re-read it'));
  assert.ok(!changedSinceRead('no commit identity is known, so nothing was committed'));
  assert.ok(!changedSinceRead(''));
  assert.ok(!changedSinceRead(undefined));
});

test('the changed-checkout note says nothing was committed', () => {
  assert.match(CHANGED_NOTE, /checkout changed/);
  assert.match(CHANGED_NOTE, /nothing was committed/);
});

test('a known identity is named with its source in words', () => {
  const who = (source) => ({ name: 'Ada', email: 'ada@example.org', source, known: true });
  assert.equal(identityText(who('repository')), "Ada <ada@example.org>, from the repository's own git config");
  assert.equal(identityText(who('config')), "Ada <ada@example.org>, from the daemon's config (git.author)");
  assert.equal(identityText(who('host')), "Ada <ada@example.org>, from the daemon user's global git config");
  assert.equal(identityText(who('')), 'Ada <ada@example.org>');
});

test('an unknown identity has no text (the fix is shown instead)', () => {
  assert.equal(identityText({ name: '', email: '', source: '', known: false, fix: 'set git.author' }), '');
  assert.equal(identityText(null), '');
});

test('commitLabel follows the index shown', async () => {
  const { commitLabel } = await import('../ui/scmrules.js');
  assert.equal(commitLabel(1, false, false), 'Commit 1 staged');
  assert.equal(commitLabel(0, false, false), 'Nothing staged');
  assert.equal(commitLabel(0, true, false), 'Commit all');
  assert.equal(commitLabel(2, false, true), 'Committing…');
});
