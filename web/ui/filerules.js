// The Files tree's changes in paths: where a new entry goes, what a name
// may be, where an open tab goes after a rename, and which tabs a delete
// closes. Paths are relative to the Session root, "/"-separated, "." the
// root. Pure: no DOM, no network (web/uitest drives it).

/** parentDir is the folder holding p ("." for a top-level entry). */
export function parentDir(p) {
  const i = p.lastIndexOf('/');
  return i < 0 ? '.' : p.slice(0, i);
}

/** joinPath puts name (which may hold "/") inside dir. */
export function joinPath(dir, name) {
  return !dir || dir === '.' ? name : `${dir}/${name}`;
}

/** targetDir is the folder a new entry goes in: the selected folder, the selected file's folder, else the root. */
export function targetDir(selected) {
  if (!selected) return '.';
  return selected.type === 'dir' ? selected.path : parentDir(selected.path);
}

/**
 * nameProblem says in words what is wrong with a typed path below the
 * root, or '' when it will do (the daemon still has the last word).
 */
export function nameProblem(p) {
  if (!p || !p.trim()) return 'Type a name.';
  if (p.startsWith('/')) return 'Type a path inside the Session folder, not one starting with “/”.';
  const parts = p.split('/');
  if (parts.some((x) => x === '')) return 'A path has no empty parts (“//”, or a “/” at the end).';
  if (parts.some((x) => x === '.' || x === '..')) return 'A path has no “.” or “..” parts.';
  if (parts.some((x) => x.toLowerCase() === '.git')) return 'Git’s own folder is changed through Git, not the Files tree.';
  return '';
}

/** within reports whether p is dir itself or inside it. */
export function within(p, dir) {
  return p === dir || p.startsWith(`${dir}/`);
}

/** renamedPath is where p is after from was renamed to to (p itself when unaffected). */
export function renamedPath(p, from, to) {
  return within(p, from) ? to + p.slice(from.length) : p;
}

/** needsRecursive reports whether deleting entry needs the recursive choice: a folder with contents (or not yet listed). */
export function needsRecursive(entry, listing) {
  if (entry.type !== 'dir') return false;
  return !listing?.entries || listing.entries.length > 0;
}
