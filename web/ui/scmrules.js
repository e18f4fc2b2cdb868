// Source Control's pure rules: the commit request (with the status token
// the pane was read with), whether a refusal means the checkout changed
// since, and the commit identity in words. Pure: no DOM, no network
// (web/uitest drives it).

/** CHANGED_NOTE is what a commit refused for a changed checkout tells the user. */
export const CHANGED_NOTE = 'The checkout changed since its status was read, so nothing was committed. ' +
  'The status below is re-read; look at it again before you commit.';

/** commitBody is the POST git/commit body: the message, stage_all when asked, and the status token shown. */
export function commitBody(message, stageAll, token) {
  const body = { message };
  if (stageAll) body.stage_all = true;
  if (token) body.status_token = token;
  return body;
}

/** changedSinceRead reports whether a commit's 409 says the checkout changed since its status was read. */
export function changedSinceRead(message) {
  return /changed since its status was read/i.test(message || '');
}

/** identityText names who a commit is signed by and where that comes from, or '' when no one is known. */
export function identityText(who) {
  if (!who || !who.known) return '';
  const from = { repository: "the repository's own git config", config: "the daemon's config (git.author)", host: "the daemon user's global git config" }[who.source];
  return `${who.name} <${who.email}>${from ? `, from ${from}` : ''}`;
}

/** commitLabel is the Commit button's words, always from the index the pane shows. */
export function commitLabel(staged, stageAll, committing) {
  if (committing) return 'Committing…';
  if (stageAll) return 'Commit all';
  return staged ? `Commit ${staged} staged` : 'Nothing staged';
}
