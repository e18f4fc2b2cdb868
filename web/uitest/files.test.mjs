// The Files tree's changes in paths (ui/filerules.js).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { joinPath, nameProblem, needsRecursive, parentDir, renamedPath, targetDir, within } from '../ui/filerules.js';

test('a new entry goes in the selected folder, the selected file’s folder, or the root', () => {
  assert.equal(targetDir(null), '.');
  assert.equal(targetDir({ path: 'src', type: 'dir' }), 'src');
  assert.equal(targetDir({ path: 'src/app.py', type: 'file' }), 'src');
  assert.equal(targetDir({ path: 'README.md', type: 'file' }), '.');
  assert.equal(joinPath('.', 'a.txt'), 'a.txt');
  assert.equal(joinPath('src', 'lib/b.py'), 'src/lib/b.py');
  assert.equal(parentDir('a/b/c'), 'a/b');
  assert.equal(parentDir('top'), '.');
});

test('a typed path is refused in words when it cannot be one below the root', () => {
  assert.equal(nameProblem('notes.txt'), '');
  assert.equal(nameProblem('src/new/x.py'), '');
  assert.match(nameProblem(''), /Type a name/);
  assert.match(nameProblem('   '), /Type a name/);
  assert.match(nameProblem('/etc/passwd'), /inside the Session folder/);
  assert.match(nameProblem('a//b'), /empty parts/);
  assert.match(nameProblem('a/'), /empty parts/);
  assert.match(nameProblem('../up'), /“\.\.”/);
  assert.match(nameProblem('.git/config'), /Git/);
  assert.match(nameProblem('sub/.GIT'), /Git/);
});

test('a rename moves the open paths under it, and only those', () => {
  assert.equal(renamedPath('src/app.py', 'src', 'lib'), 'lib/app.py');
  assert.equal(renamedPath('src', 'src', 'lib'), 'lib');
  assert.equal(renamedPath('srcx/app.py', 'src', 'lib'), 'srcx/app.py');
  assert.equal(renamedPath('README.md', 'README.md', 'docs/README.md'), 'docs/README.md');
  assert.ok(within('a/b', 'a'));
  assert.ok(!within('ab', 'a'));
});

test('a folder with contents, or not listed yet, needs the recursive choice; a file or an empty folder does not', () => {
  assert.equal(needsRecursive({ type: 'file' }, undefined), false);
  assert.equal(needsRecursive({ type: 'dir' }, { entries: [] }), false);
  assert.equal(needsRecursive({ type: 'dir' }, { entries: [{ name: 'x' }] }), true);
  assert.equal(needsRecursive({ type: 'dir' }, undefined), true);
});
