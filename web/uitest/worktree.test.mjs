// Worktree Sessions in words (ui/worktreerules.js): the New Session
// dialog's isolation default and why a worktree is off, the merge block's
// words and request, a refusal, and what a forced delete removes and keeps.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  aheadText, count, deleteWords, discardFiles, isolationChoice, mergeBlocker, mergeBody, mergeLabel, mergeRefusal, mergedText, names, sharing,
} from '../ui/worktreerules.js';

const git = { is_git_repo: true };
const sess = (id, extra = {}) => ({ id, name: `s-${id}`, workspace_id: 'w1', status: 'ready', ...extra });

test('counts read as words', () => {
  assert.equal(count(1, 'commit'), '1 commit');
  assert.equal(count(3, 'commit'), '3 commits');
  assert.equal(count(0, 'file'), '0 files');
  assert.equal(count(1200, 'file'), '1,200 files');
});

test('only open Sessions of the Workspace working in its folder itself share it', () => {
  const all = [
    sess('a'),
    sess('b', { isolation: 'shared' }),
    sess('c', { isolation: 'worktree' }),
    sess('d', { status: 'closed' }),
    sess('e', { workspace_id: 'w2' }),
  ];
  assert.deepEqual(sharing(all, 'w1').map((s) => s.id), ['a', 'b']);
  assert.deepEqual(sharing(all, 'w1', 'a').map((s) => s.id), ['b']);
  assert.deepEqual(sharing(all, 'w3'), []);
});

const choices = [
  { name: 'a Git folder nobody works in: shared', probe: git, others: [], chosen: '', value: 'shared', off: false, why: false },
  { name: 'a Git folder another Session works in: a worktree, and why', probe: git, others: [sess('a')], chosen: '', value: 'worktree', off: false, why: /“s-a” already works in this folder/ },
  { name: 'the user’s shared choice wins over the default', probe: git, others: [sess('a')], chosen: 'shared', value: 'shared', off: false, why: false },
  { name: 'the user’s worktree choice on a free folder', probe: git, others: [], chosen: 'worktree', value: 'worktree', off: false, why: false },
  { name: 'not a Git repository: shared, the worktree off with the reason', probe: { is_git_repo: false }, others: [sess('a')], chosen: 'worktree', value: 'shared', off: /not a Git repository/, why: false },
  { name: 'the probe not yet answered: shared, off while checking', probe: null, others: [sess('a')], chosen: '', value: 'shared', off: /Checking/, why: false },
  { name: 'the probe refused: shared, off saying so', probe: { error: 'no such folder' }, others: [], chosen: 'worktree', value: 'shared', off: /no such folder/, why: false },
  { name: 'three others are named two and a count', probe: git, others: [sess('a'), sess('b'), sess('c')], chosen: '', value: 'worktree', off: false, why: /“s-a” and “s-b” and 1 other already work/ },
];

for (const c of choices) {
  test(`isolation: ${c.name}`, () => {
    const got = isolationChoice(c.probe, c.others, c.chosen);
    assert.equal(got.value, c.value);
    if (c.off) assert.match(got.off, c.off);
    else assert.equal(got.off, '');
    if (c.why) assert.match(got.why, c.why);
    else assert.equal(got.why, '');
  });
}

test('where the branch stands, in words', () => {
  assert.equal(aheadText({ base_branch: 'main', ahead: 3, behind: 0 }), '3 commits ahead of main in the Workspace');
  assert.equal(aheadText({ base_branch: 'main', ahead: 1, behind: 2 }), '1 commit ahead of main in the Workspace, 2 behind');
  assert.equal(aheadText({ base_branch: 'dev', ahead: 0, behind: 0 }), 'Even with dev in the Workspace: nothing to merge');
  assert.equal(aheadText({ base_branch: 'main', ahead: 0, behind: 4 }), 'Nothing to merge: 4 commits behind main in the Workspace');
  assert.equal(aheadText({ base_branch: 'main', ahead: 0, behind: 1 }), 'Nothing to merge: 1 commit behind main in the Workspace');
});

test('the merge buttons name what happens', () => {
  const wt = { base_branch: 'main', ahead: 3 };
  assert.equal(mergeLabel('merge', wt), 'Merge 3 commits into main');
  assert.equal(mergeLabel('squash', wt), 'Squash 3 commits into one on main');
  assert.equal(mergeLabel('merge', { base_branch: 'trunk', ahead: 1 }), 'Merge 1 commit into trunk');
  assert.equal(mergeLabel('merge', wt, true), 'Merging…');
  assert.equal(mergeLabel('squash', wt, true), 'Squashing…');
});

test('a merge sends its message only when one is typed', () => {
  assert.deepEqual(mergeBody('merge', ''), { strategy: 'merge' });
  assert.deepEqual(mergeBody('squash', '   '), { strategy: 'squash' });
  assert.deepEqual(mergeBody('squash', ' one change \n'), { strategy: 'squash', message: 'one change' });
});

test('a merge the daemon would refuse is off, with the reason', () => {
  const wt = { base_branch: 'main', ahead: 2 };
  assert.equal(mergeBlocker(wt, []), '');
  assert.match(mergeBlocker({ base_branch: 'main', ahead: 0 }, []), /no commits that main lacks/);
  const open = mergeBlocker(wt, [{ path: 'a.py', unstaged: 'modified' }, { path: 'b.py', staged: 'added' }, { path: 'c.txt', unstaged: 'untracked' }]);
  assert.match(open, /Commit or discard the 3 uncommitted changes first \(a\.py, b\.py, c\.txt\)/);
  assert.match(mergeBlocker(wt, [{ path: 'x', conflict: 'both_modified' }]), /1 uncommitted change first \(x\)/);
  assert.match(mergeBlocker({ ...wt, conflicts: ['calc.py'] }, []), /would conflict in calc\.py, so it would be refused/);
  assert.equal(mergeBlocker({ ...wt, conflicts: [] }, []), '');
});

test('a forced delete discards every changed path, both sides of a rename, once each', () => {
  assert.deepEqual(discardFiles([]), []);
  assert.deepEqual(discardFiles(undefined), []);
  assert.deepEqual(discardFiles([{ path: 'b.py' }, { path: 'new.py', orig_path: 'old.py' }, { path: 'a.txt' }, { path: 'b.py' }]),
    ['a.txt', 'b.py', 'new.py', 'old.py']);
});

test('a refusal keeps the daemon’s reason and the files it names, as strings or records', () => {
  const err = (status, message, body) => Object.assign(new Error(message), { status, body });
  assert.deepEqual(mergeRefusal(err(409, 'the merge would overwrite untracked files in the Workspace folder; nothing was changed', { files: ['NEWS.md'] })),
    { reason: 'the merge would overwrite untracked files in the Workspace folder; nothing was changed', files: ['NEWS.md'] });
  assert.equal(mergeRefusal(err(409, 'the worktree has uncommitted changes', {})).reason, 'the worktree has uncommitted changes; nothing was changed');
  assert.deepEqual(mergeRefusal(err(409, 'the merge conflicts', { files: [{ path: 'a.py' }, { path: 'b.py' }] })).files, ['a.py', 'b.py']);
  assert.deepEqual(mergeRefusal(err(409, 'the worktree has uncommitted changes', { error: 'x' })).files, []);
  assert.match(mergeRefusal(err(0, 'the daemon did not answer')).reason, /^the merge failed: the daemon did not answer/);
});

test('a merge says what it did', () => {
  assert.equal(mergedText({ strategy: 'merge', ahead: 3, base: 'main', commit: '0123456789abcdef', files: ['a', 'b'] }),
    'Merged 3 commits into main as 01234567 (2 files)');
  assert.equal(mergedText({ strategy: 'squash', ahead: 1, base: 'main', commit: 'fedcba9876543210', files: [{ path: 'a', status: 'M' }] }),
    'Squashed 1 commit into main as fedcba98 (1 file)');
});

test('a forced delete names the uncommitted files it loses and whether the branch stays', () => {
  const s = { working_dir: '/wt/01J', branch: 'lathe/01J' };
  const st = (files, ahead) => ({ files, worktree: { base_branch: 'main', ahead, behind: 0, files: [] } });
  assert.deepEqual(deleteWords(s, st([{ path: 'a.py' }, { path: 'b.py' }], 2)), [
    'Its worktree folder /wt/01J is removed, and with it 2 uncommitted changes, lost for good: a.py, b.py.',
    'Its branch lathe/01J is kept: it has 2 commits that main lacks.',
  ]);
  assert.deepEqual(deleteWords(s, st([], 0)), [
    'Its worktree folder /wt/01J is removed; it has no uncommitted changes.',
    'Its branch lathe/01J has nothing main lacks.',
  ]);
  const unread = deleteWords(s, undefined);
  assert.match(unread[0], /with any uncommitted changes in it/);
  assert.match(unread[1], /kept if it has commits/);
});

test('long path lists are cut at five with a count', () => {
  assert.equal(names(['a', 'b']), 'a, b');
  assert.equal(names(['1', '2', '3', '4', '5', '6', '7']), '1, 2, 3, 4, 5 and 2 more');
});
