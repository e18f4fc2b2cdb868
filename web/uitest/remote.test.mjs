// Remote Sessions in words (ui/remoterules.js): which Sessions are remote,
// the sync block's words and refusals, what close and delete bring home,
// the retained-runtime banner's commands and confirmation body, and the
// New Session dialog's template.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  homeWords, hostOf, isRemote, refusalNow, remoteProbe, retainedWords, syncBlocker, syncBrings, syncCommits, syncRefusal, syncedText, templateWords,
} from '../ui/remoterules.js';

const remote = (env = {}) => ({ id: 'S1', environment: { state: 'ready', runtime_id: 'c0ffee', creation_token: 'tok', ...env } });
const st = (branch, files = []) => ({ branch: { head: 'main', commit: 'abcdef0123456789', ...branch }, files });
const evidence = {
  error: 'the runtime on the Docker engine at ssh://me@box was kept: remove the runtime: engine unavailable',
  fix: 'delete container c0ffee on ssh://me@box by hand (its work is still in it), then confirm with POST …',
};

test('a Session is remote when its environment names a runtime, a token, a retained runtime or a sync', () => {
  for (const [name, s, want] of [
    ['runtime', { environment: { runtime_id: 'c' } }, true],
    ['token only', { environment: { creation_token: 't' } }, true],
    ['retained', { environment: { retained: true, retained_runtimes: [{}] } }, true],
    ['synced, closed', { environment: { synced: { branch: 'lathe/S', commit: 'c' } } }, true],
    ['local', { environment: { state: 'ready' } }, false],
    ['no environment', {}, false],
  ]) assert.equal(isRemote(s), want, name);
});

test('the sync block names the commits it brings', () => {
  const cases = [
    { name: 'last commit and subject', st: st({}), br: { branches: [{ current: true, subject: 'add hello' }] },
      want: 'Brings the clone’s branch main, up to abcdef01 “add hello”, to the Workspace repository.' },
    { name: 'ahead of upstream', st: st({ upstream: 'origin/main', ahead: 2 }), br: null,
      want: 'Brings the clone’s branch main, 2 commits ahead of origin/main, up to abcdef01, to the Workspace repository.' },
    { name: 'no commit', st: st({ initial: true }), br: null, want: 'The clone has no commit yet: commit first, then sync.' },
    { name: 'unread', st: null, br: null, want: 'Reading the clone’s branch…' },
  ];
  for (const c of cases) assert.equal(syncBrings(remote(), c.st, c.br), c.want, c.name);
  const home = syncBrings(remote({ synced: { commit: 'abcdef0123456789' } }), st({}), null);
  assert.match(home, /Already home: lathe\/S1 is at abcdef01\./);
});

test('the sync block lists the commits the clone has beyond lathe/<id> or the Workspace HEAD', () => {
  const c = (n) => ({ commit: `${n}`.repeat(40), subject: `commit ${n}`, author: 'Ann', time: 1_700_000_000 });
  const sy = (sync) => ({ ...st({}), sync: { branch: 'lathe/S1', commits: [], truncated: false, ...sync } });
  for (const [name, status, want] of [
    ['before the first sync', sy({ base: 'HEAD', base_commit: 'f'.repeat(40), ahead: 2, commits: [c(2), c(1)] }),
      'Brings 2 commits of the clone’s branch main that the Workspace’s HEAD lacks, to lathe/S1:'],
    ['after a sync', sy({ base: 'lathe/S1', base_commit: 'e'.repeat(40), ahead: 1, commits: [c(3)] }),
      'Brings 1 commit of the clone’s branch main that lathe/S1 lacks, to lathe/S1:'],
    ['home', sy({ base: 'lathe/S1', base_commit: 'e'.repeat(40), ahead: 0 }),
      'Already home: lathe/S1 is at eeeeeeee, and the clone’s branch main has no commit it lacks.'],
    ['nothing yet', sy({ base: 'HEAD', base_commit: 'f'.repeat(40), ahead: 0 }),
      'Nothing to bring yet: the clone’s branch main has no commit the Workspace’s HEAD lacks.'],
    ['no common commit', sy({ base: '', ahead: 1, commits: [c(1)] }),
      'Brings 1 commit of the clone’s branch main that the Workspace repository lacks, to lathe/S1:'],
  ]) assert.equal(syncBrings(remote(), status, null), want, name);
  const listed = syncCommits(sy({ base: 'HEAD', ahead: 60, truncated: true, commits: [c(2), { ...c(1), subject: '' }] }));
  assert.deepEqual(listed.list.map((x) => `${x.commit} ${x.subject}`), ['22222222 commit 2', '11111111 (no subject)']);
  assert.equal(listed.more, 58);
  assert.match(listed.list[0].title, /^2{40} by Ann, 2023-11-14 22:13 UTC$/);
  assert.deepEqual(syncCommits(st({})), { list: [], more: 0 });
});

test('a sync is held back when not Ready or dirty, and refusals read commit first', () => {
  assert.equal(syncBlocker(remote(), st({})), '');
  assert.match(syncBlocker(remote({ state: 'preparing' }), st({})), /not Ready/);
  assert.match(syncBlocker(remote(), st({}, [{ path: 'a' }, { path: 'b' }])), /^Commit the 2 uncommitted changes first/);
  for (const [name, err, want] of [
    ['dirty', { status: 409, message: 'the clone has uncommitted changes; commit them first' }, /^Commit first: the clone has uncommitted changes.*Nothing was changed\.$/],
    ['not ready', { status: 409, message: 'session "S1" is not ready' }, /^The Session is not Ready/],
    ['no commit', { status: 409, message: 'the clone has no commit yet' }, /^Commit first: the clone has no commit yet/],
    ['other 409', { status: 409, message: 'the Workspace is not a Git repository' }, /^The sync was refused: the Workspace is not a Git repository\. Nothing was changed\.$/],
    ['500', { status: 500, message: 'boom' }, /^The sync failed: boom\.$/],
  ]) assert.match(syncRefusal(err), want, name);
  assert.equal(syncedText({ branch: 'lathe/S1', commit: '0123456789abcdef' }),
    'Branch lathe/S1 is at 01234567 in the Workspace repository; its folder, index and current branch are untouched');
});

test('a commit-first refusal goes once the clone is committed and clean; others stay', () => {
  const dirty = 'Commit first: the clone has uncommitted changes, and a sync brings commits only (x). Nothing was changed.';
  assert.equal(refusalNow(dirty, st({}, [{ path: 'a' }])), dirty);
  assert.equal(refusalNow(dirty, st({})), '');
  assert.equal(refusalNow(dirty, st({ initial: true })), dirty);
  assert.equal(refusalNow(dirty, null), dirty);
  assert.equal(refusalNow('The sync failed: boom.', st({})), 'The sync failed: boom.');
  assert.equal(refusalNow('', st({})), '');
});

test('close and delete say the work goes home first', () => {
  const w = homeWords(remote(), 'closes');
  assert.match(w, /^Before it closes, its work is brought home to branch lathe\/S1/);
  assert.match(w, /uncommitted changes as one more commit/);
});

test('a retained runtime names the host, what to delete and the matching confirmation', () => {
  assert.equal(hostOf({ evidence }), 'ssh://me@box');
  assert.equal(hostOf({ evidence: { error: 'x' } }), '');
  const byId = retainedWords({ runtime_id: 'c0ffee', creation_token: 'tok', evidence });
  assert.deepEqual(byId.commands, ['docker -H ssh://me@box rm -f c0ffee']);
  assert.deepEqual(byId.body, { runtime_id: 'c0ffee', confirmed: true });
  const byToken = retainedWords({ creation_token: 'tok', evidence: { error: 'lost' } });
  assert.equal(byToken.host, '');
  assert.deepEqual(byToken.commands, ['docker ps -aq --filter label=service_creation_token=tok | xargs -r docker rm -f']);
  assert.equal(byToken.what, 'every container labelled service_creation_token=tok');
  assert.deepEqual(byToken.body, { creation_token: 'tok', confirmed_all_matching_sandboxes_deleted: true });
});

test('the New Session dialog names the template under remote', () => {
  assert.equal(remoteProbe({ supports_session_image: false, template: 't:1' }), true);
  assert.equal(remoteProbe({ supports_session_image: true }), false);
  assert.equal(remoteProbe(null), false);
  assert.match(templateWords({ template: 'lathe.local/sandbox:bookworm' }), /template lathe\.local\/sandbox:bookworm on the remote Docker engine/);
});
