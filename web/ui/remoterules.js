// Remote Sessions in words (sandbox.provider remote): whether a Session's
// code is a clone on a Docker engine, Source Control's sync block (the
// branch lathe/<id>, the commits it brings, a refusal, what was brought),
// what close and delete bring home first, the retained-runtime banner
// (the host, what to delete by hand, the confirmation's body) and the New
// Session dialog's template. Pure: no DOM, no network (web/uitest drives it).

import { count } from './worktreerules.js';

/** isRemote: the Session's code is a clone in a remote sandbox (its environment names a runtime, a token, a retained runtime or a sync). */
export function isRemote(s) {
  const e = s?.environment;
  return !!(e && (e.runtime_id || e.creation_token || e.retained || e.retained_runtimes?.length || e.synced));
}

/** homeBranch is the Workspace branch a remote Session's work comes home to. */
export function homeBranch(s) {
  return `lathe/${s.id}`;
}

/** short is a commit's first eight hex digits. */
export function short(commit) {
  return String(commit || '').slice(0, 8);
}

/**
 * syncBrings says what a sync brings. With the status's sync part (read
 * from the clone: its commits beyond the Workspace's lathe/<id>, or its
 * HEAD before the first sync) it counts them and names what they are
 * measured against; without it (an older daemon), the branch's last commit
 * or its commits ahead of the branch it tracks.
 */
export function syncBrings(s, st, branches) {
  const b = st?.branch;
  if (!b) return 'Reading the clone’s branch…';
  if (b.initial) return 'The clone has no commit yet: commit first, then sync.';
  const where = b.detached ? `the clone’s detached HEAD` : `the clone’s branch ${b.head}`;
  const y = st.sync;
  if (y) {
    const against = y.base === homeBranch(s) ? homeBranch(s) : y.base === 'HEAD' ? 'the Workspace’s HEAD' : 'the Workspace repository';
    if (y.ahead) return `Brings ${count(y.ahead, 'commit')} of ${where} that ${against} lacks, to ${homeBranch(s)}:`;
    if (y.base === homeBranch(s)) return `Already home: ${homeBranch(s)} is at ${short(y.base_commit)}, and ${where} has no commit it lacks.`;
    return `Nothing to bring yet: ${where} has no commit ${against} lacks.`;
  }
  const tip = (branches?.branches || []).find((x) => x.current) || {};
  const last = `${short(b.commit)}${tip.subject ? ` “${tip.subject}”` : ''}`;
  const ahead = b.upstream && b.ahead ? `, ${count(b.ahead, 'commit')} ahead of ${b.upstream}` : '';
  const home = s.environment?.synced?.commit === b.commit ? ` Already home: ${homeBranch(s)} is at ${short(b.commit)}.` : '';
  return `Brings ${where}${ahead}, up to ${last}, to the Workspace repository.${home}`;
}

/**
 * syncCommits is the list under syncBrings: each commit a sync brings,
 * newest first ({commit: its first eight digits, subject, title: who and
 * when}), and how many more the status did not list.
 */
export function syncCommits(st) {
  const y = st?.sync;
  const list = (y?.commits || []).map((c) => ({
    commit: short(c.commit),
    subject: c.subject || '(no subject)',
    title: `${c.commit} by ${c.author || 'someone'}${c.time ? `, ${new Date(c.time * 1000).toISOString().replace('T', ' ').slice(0, 16)} UTC` : ''}`,
  }));
  return { list, more: Math.max(0, (y?.ahead || 0) - list.length) };
}

/** syncBlocker says why a sync would be refused before it is sent, or '' when it may go. The daemon has the last word. */
export function syncBlocker(s, st) {
  if (s.environment?.state !== 'ready') return 'The Session’s environment is not Ready; sync once it is.';
  if (st?.branch?.initial) return 'The clone has no commit yet.';
  const open = st?.files || [];
  if (open.length) return `Commit the ${count(open.length, 'uncommitted change')} first: a sync brings commits only.`;
  return '';
}

/** syncRefusal is a refused sync in words, the reason first: the clone dirty, not Ready, or no Git Workspace. */
export function syncRefusal(err) {
  const msg = String(err?.message || 'no answer').replace(/\.$/, '');
  if (err?.status !== 409) return `The sync failed: ${msg}.`;
  if (/uncommitted/i.test(msg)) return `Commit first: the clone has uncommitted changes, and a sync brings commits only (${msg}). Nothing was changed.`;
  if (/not ready/i.test(msg)) return `The Session is not Ready, so its clone cannot be read (${msg}). Nothing was changed.`;
  if (/no commit/i.test(msg)) return `Commit first: the clone has no commit yet. Nothing was changed.`;
  return `The sync was refused: ${msg}. Nothing was changed.`;
}

/** refusalNow is a sync refusal still worth showing: a "commit first" one goes once the status shows a committed clean clone. */
export function refusalNow(refusal, st) {
  if (!refusal || !/^Commit first/.test(refusal)) return refusal || '';
  return st?.branch && !st.branch.initial && !(st.files || []).length ? '' : refusal;
}

/** syncedText says what a sync brought: "Branch lathe/01J… is at 1a2b3c4d in the Workspace repository". */
export function syncedText(r) {
  return `Branch ${r.branch} is at ${short(r.commit)} in the Workspace repository; its folder, index and current branch are untouched`;
}

/** homeWords is what close or delete brings home first, in one sentence. */
export function homeWords(s, verb) {
  return `Before it ${verb}, its work is brought home to branch ${homeBranch(s)} in the Workspace repository: `
    + 'its commits, and any uncommitted changes as one more commit on top. The Workspace folder itself is not touched.';
}

/** hostOf is the engine's host a retained runtime's evidence names, '' when it names none. */
export function hostOf(rr) {
  const m = /Docker engine at (\S+?) was kept/.exec(rr?.evidence?.error || '') || /\bon (\S+) by hand/.exec(rr?.evidence?.fix || '');
  return m ? m[1] : '';
}

/**
 * retainedWords is the banner of one retained runtime: the host, the
 * runtime ID and token, the commands that delete it by hand, and the
 * confirmation body matching it (by runtime ID when the engine gave one,
 * else by creation token).
 */
export function retainedWords(rr) {
  const host = hostOf(rr);
  const h = host ? ` -H ${host}` : '';
  const byId = !!rr.runtime_id;
  return {
    host,
    commands: byId
      ? [`docker${h} rm -f ${rr.runtime_id}`]
      : [`docker${h} ps -aq --filter label=service_creation_token=${rr.creation_token} | xargs -r docker${h} rm -f`],
    what: byId ? `container ${rr.runtime_id}` : `every container labelled service_creation_token=${rr.creation_token}`,
    confirm: byId ? `I deleted container ${short(rr.runtime_id)}` : 'I deleted every container with this token',
    body: byId ? { runtime_id: rr.runtime_id, confirmed: true } : { creation_token: rr.creation_token, confirmed_all_matching_sandboxes_deleted: true },
  };
}

/** templateWords is the New Session dialog's environment under remote: the operator's one image, from the probe. */
export function templateWords(probe) {
  const t = probe?.template;
  return t
    ? `Runs in the operator’s template ${t} on the remote Docker engine: under the remote sandbox provider a Session cannot choose its image.`
    : 'Runs in the operator’s template on the remote Docker engine: under the remote sandbox provider a Session cannot choose its image.';
}

/** remoteProbe: the probe says Sessions run under the remote provider (no image of their own). */
export function remoteProbe(probe) {
  return probe?.supports_session_image === false;
}
