// Source Control: the Session's Git status (with the Last-turn flags), one
// path's diff as hunks that stage, unstage or discard one by one, commit,
// branches and checkout, and the Check. Every hunk change sends the hunk's
// "@@" header, so a hunk that changed since it was shown is refused (409)
// rather than applied to the wrong lines. Discards and a checkout over
// changes ask first: the routes leave confirmation to the client.

import { html, nothing, live, ref } from '/vendor/lit.js';
import * as S from './store.js';
import { api, ApiError, path, sessionPath } from './api.js';
import { mod, modKey } from './util.js';
import { gitMarks } from './treemarks.js';
import { diffView as lineDiffView } from './diffview.js';
import { CHANGED_NOTE, changedSinceRead, commitBody, commitLabel, identityText } from './scmrules.js';
import { FILE_STATE, aheadText, mergeBlocker, mergeBody, mergeLabel, mergeRefusal, mergedText } from './worktreerules.js';
import { homeBranch, isRemote, refusalNow, syncBlocker, syncBrings, syncCommits, syncRefusal, syncedText } from './remoterules.js';

const STATE_MARK = {
  added: 'A', modified: 'M', deleted: 'D', renamed: 'R', copied: 'C', type_changed: 'T', untracked: 'U',
};

export class Scm {
  constructor(app) {
    this.app = app;
    this.session = null;
    this.gen = 0; // bumps on every Session change, to drop stale answers
    this.reads = 0; // bumps on every status read, so only the latest lands
    this.reset();
  }

  reset() {
    this.status = null;
    this.branches = null;
    this.error = ''; // the status read's refusal
    this.notRepo = false;
    this.loading = false;
    this.selected = null; // {path, staged}
    this.hunks = null; // the selected path's hunks answer
    this.diffError = '';
    this.stale = ''; // the last 409 of a hunk change
    this.busy = '';
    this.message = '';
    this.stageAll = false;
    this.checkDraft = null; // the check command being edited; null shows the Session's
    this.check = null; // the last run's result
    this.checking = false;
    this.identity = null; // who a commit is signed by: {name, email, source, known, fix?}
    this.identityError = '';
    this.commitError = ''; // why the last commit was refused, shown beside Commit
    this.mergeMessage = ''; // a squash's optional commit message
    this.merged = null; // the last merge's answer, with what it merged: {commit, files, strategy, ahead, base}
    this.mergeRefused = null; // the last merge's refusal: {reason, files}
    this.synced = null; // the last sync's answer: {branch, commit}
    this.syncRefused = ''; // the last sync's refusal, in words
  }

  /** show binds the pane to a Session and loads it on first sight. */
  show(id) {
    if (id !== this.session) {
      this.session = id;
      this.gen++;
      this.reset();
    }
    if ((!this.status || this.outdated) && !this.loading && !this.error && this.usable()) this.refresh();
  }

  usable() {
    return !!this.session && this.app.runtimeState(this.session).usable;
  }

  /** revalidate re-reads an open pane, after something may have changed the worktree. */
  revalidate() {
    this.outdated = true; // a closed pane re-reads when it is shown again
    if (this.session && this.app.ui.inspector === 'git' && this.usable()) this.refresh();
  }

  /**
   * refresh re-reads the status, the branches and the selected diff. It
   * resolves once the pane shows a read that started after it was called:
   * when a later read (a checkout-changed notice, say) supersedes this one,
   * it waits for that one too, so "Committed." never shows beside the
   * status from before the commit.
   */
  async refresh() {
    let p = (this.latest = this.read());
    await p;
    while (this.latest !== p) {
      p = this.latest;
      await p;
    }
  }

  /** read is one read of the pane; a later read wins over an earlier one still under way. */
  async read() {
    const id = this.session;
    const gen = this.gen;
    const read = ++this.reads;
    this.loading = true;
    this.outdated = false;
    this.app.update();
    try {
      const [status, branches] = await Promise.all([
        api('GET', sessionPath(id, '/git/status')),
        api('GET', sessionPath(id, '/git/branches')),
      ]);
      await this.loadIdentity(id, gen); // a repository only: elsewhere it is refused like the status
      if (gen !== this.gen || read !== this.reads) return;
      this.status = status;
      if (this.app.files.session === id) this.app.files.git = gitMarks(status.files); // the tree's marks follow
      this.branches = branches;
      this.error = '';
      this.notRepo = false;
    } catch (err) {
      if (gen !== this.gen || read !== this.reads) return;
      this.status = null;
      this.error = err.message;
      this.notRepo = err instanceof ApiError && err.status === 409 && /not a git repository/i.test(err.message);
      if (err instanceof ApiError && err.status === 401) this.app.fail(err);
    } finally {
      if (gen === this.gen && read === this.reads) this.loading = false;
    }
    if (read !== this.reads) return;
    if (this.selected) await this.loadHunks();
    this.app.update();
  }

  /** loadIdentity reads who a commit made now is signed by; a failure is shown, not thrown. */
  async loadIdentity(id, gen) {
    try {
      const who = await api('GET', sessionPath(id, '/git/identity'));
      if (gen !== this.gen) return;
      this.identity = who;
      this.identityError = '';
    } catch (err) {
      if (gen !== this.gen) return;
      this.identity = null;
      this.identityError = err.message;
    }
  }

  /** select opens one path's diff, the staged or the unstaged side. */
  async select(p, staged) {
    this.selected = { path: p, staged };
    this.hunks = null;
    this.stale = '';
    await this.loadHunks();
  }

  async loadHunks() {
    const id = this.session;
    const gen = this.gen;
    const sel = this.selected;
    try {
      const h = await api('GET', path(sessionPath(id, '/git/hunks'), { path: sel.path, staged: sel.staged }));
      if (gen !== this.gen || sel !== this.selected) return;
      this.hunks = h;
      this.diffError = '';
    } catch (err) {
      if (gen !== this.gen || sel !== this.selected) return;
      this.hunks = null;
      this.diffError = err.message;
    }
    this.app.update();
  }

  /** change runs one Git change, then re-reads; it reports whether it was made. */
  async change(what, route, body) {
    const id = this.session;
    this.busy = what;
    this.stale = '';
    this.app.update();
    let ok = true;
    try {
      await api('POST', sessionPath(id, route), body);
    } catch (err) {
      ok = false;
      if (err instanceof ApiError && err.status === 409 && body?.header) {
        this.stale = `${what} refused: ${err.message}. The diff below is re-read; look again before you act.`;
      } else {
        this.app.fail(err, what);
      }
    }
    this.busy = '';
    await this.refresh();
    return ok;
  }

  stagePaths(paths) {
    return this.change(paths.length ? `Staging ${paths.join(', ')}` : 'Staging all', '/git/stage', { paths });
  }

  unstagePaths(paths) {
    return this.change(paths.length ? `Unstaging ${paths.join(', ')}` : 'Unstaging all', '/git/unstage', { paths });
  }

  /** hunk stages (or, on the staged side, unstages) one hunk, as it was shown. */
  hunk(h) {
    const sel = this.selected;
    const stage = !sel.staged;
    return this.change(`${stage ? 'Staging' : 'Unstaging'} hunk ${h.index + 1} of ${sel.path}`, '/git/hunk',
      { path: sel.path, index: h.index, stage, header: h.header });
  }

  discardHunk(h) {
    const sel = this.selected;
    this.confirm(`Discard hunk ${h.index + 1}?`,
      html`<p>Discarding hunk <code>${h.header}</code> of <code>${sel.path}</code> throws its unstaged lines away for good.</p>`,
      'Discard hunk', () => this.change(`Discarding hunk ${h.index + 1} of ${sel.path}`, '/git/hunk/discard',
        { path: sel.path, index: h.index, header: h.header }));
  }

  discardPath(p) {
    const title = p ? `Discard changes to ${p}?` : 'Discard all unstaged changes?';
    this.confirm(title, html`<p>${p ? html`The unstaged changes to <code>${p}</code>` : 'Every unstaged change in this Session'}
      ${' '}are lost for good${p ? '' : '; untracked files are left alone'}. Staged changes stay.</p>`,
    'Discard', async () => {
      if (this.selected?.path === p || !p) this.selected = null;
      await this.change(p ? `Discarding ${p}` : 'Discarding all', '/git/discard', p ? { path: p } : {});
    });
  }

  /** checkout switches branch; over uncommitted changes it asks first. */
  checkout(ref) {
    const go = async () => {
      this.selected = null;
      const ok = await this.change(`Checking out ${ref}`, '/git/checkout', { ref });
      if (ok) this.app.files.revalidate();
    };
    const n = this.status?.total || 0;
    if (!n) return go();
    this.confirm(`Check out ${ref}?`, html`<p>This Session has ${n} uncommitted change${n === 1 ? '' : 's'}. Git carries them
      over to <code>${ref}</code> where it can, and refuses where they conflict; check the status afterwards.</p>`,
    'Check out', go);
  }

  /**
   * commit commits exactly what the pane shows: it sends the status token
   * it was read with, and a checkout that changed since is refused (409),
   * re-read, and said in words.
   */
  async commit() {
    const body = commitBody(this.message, this.stageAll, this.status?.token);
    this.busy = 'Committing';
    this.commitError = '';
    this.stale = '';
    this.app.update();
    let ok = false;
    try {
      await api('POST', sessionPath(this.session, '/git/commit'), body);
      ok = true;
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) this.app.fail(err);
      // Beside the button that caused it, never only in a toast or above the scrolled view.
      this.commitError = err instanceof ApiError && err.status === 409 && changedSinceRead(err.message)
        ? CHANGED_NOTE : `Nothing was committed: ${err.message}`;
    }
    this.busy = '';
    if (ok) {
      this.message = '';
      this.stageAll = false;
    }
    await this.refresh();
    if (ok) this.app.toast('Committed.'); // after the re-read, as every change reports
  }

  /**
   * merge brings a worktree Session's branch home into the Workspace's
   * branch (strategy "merge" or "squash"). A refusal changes nothing and
   * is shown in the block with the files it names; either way the pane
   * re-reads, so ahead and behind follow.
   */
  async merge(strategy) {
    const wt = this.status?.worktree;
    if (!wt || this.busy) return;
    const gen = this.gen;
    this.busy = strategy === 'squash' ? 'Squashing' : 'Merging';
    this.merged = null;
    this.mergeRefused = null;
    this.app.update();
    try {
      const r = await api('POST', sessionPath(this.session, '/merge'), mergeBody(strategy, strategy === 'squash' ? this.mergeMessage : ''));
      if (gen !== this.gen) return;
      this.merged = { ...r, strategy, ahead: wt.ahead, base: wt.base_branch };
      this.mergeMessage = '';
      this.app.files.revalidate(); // a branch brought up to date after its merge changes the worktree too
    } catch (err) {
      if (gen !== this.gen) return;
      if (err instanceof ApiError && err.status === 401) this.app.fail(err);
      this.mergeRefused = mergeRefusal(err);
    } finally {
      if (gen === this.gen) this.busy = '';
    }
    await this.refresh();
  }

  /**
   * sync brings a remote Session's committed work home: the clone's branch
   * is fetched into the Workspace repository as lathe/<id>. A refusal (the
   * clone dirty or not Ready) changes nothing and is shown in the block.
   */
  async sync() {
    if (this.busy) return;
    const gen = this.gen;
    this.busy = 'Syncing';
    this.synced = null;
    this.syncRefused = '';
    this.app.update();
    try {
      const r = await api('POST', sessionPath(this.session, '/sync'));
      if (gen !== this.gen) return;
      this.synced = r;
    } catch (err) {
      if (gen !== this.gen) return;
      if (err instanceof ApiError && err.status === 401) this.app.fail(err);
      this.syncRefused = syncRefusal(err);
    } finally {
      if (gen === this.gen) this.busy = '';
    }
    await this.refresh();
  }

  confirm(title, body, label, action) {
    this.app.dialogs.open('confirm', { title, body, label, action, cls: 'danger' });
  }

  async saveCheck(s) {
    const cmd = (this.checkDraft ?? s.check_command ?? '').trim();
    try {
      const ss = await api('PUT', sessionPath(s.id, '/check'), { check_command: cmd || null });
      S.setSession(this.app.state, ss);
      this.checkDraft = null;
      return true;
    } catch (err) {
      this.app.fail(err, 'Setting the Check');
      return false;
    } finally {
      this.app.update();
    }
  }

  async runCheck(s) {
    if (this.checkDraft !== null && this.checkDraft.trim() !== (s.check_command || '') && !(await this.saveCheck(s))) return;
    const gen = this.gen;
    this.checking = true;
    this.app.update();
    try {
      const r = await api('POST', sessionPath(s.id, '/check/run'), {});
      if (gen === this.gen) this.check = r;
    } catch (err) {
      this.app.fail(err, 'Running the Check');
    }
    this.checking = false;
    this.app.update();
  }
}

// ---------------------------------------------------------------------------
// Views

/** nearby scrolls an element that just appeared into view, once: an error shows where the eye is. */
function nearby(el) {
  if (el && !el.dataset.seen) {
    el.dataset.seen = '1';
    requestAnimationFrame(() => el.scrollIntoView({ block: 'nearest' }));
  }
}

export function scmView(app, s) {
  const scm = app.scm;
  scm.show(s.id);
  const st = scm.status;
  return html`<div class="panel scm">
    <div class="panel-head">
      <strong>Source Control</strong>
      ${st ? html`<span class="branch mono" title=${st.branch.commit}>⎇ ${st.branch.detached ? `detached at ${st.branch.commit.slice(0, 8)}` : st.branch.head}${st.branch.initial ? ' (no commits yet)' : ''}</span>
        ${st.branch.upstream ? html`<span class="muted small">↑${st.branch.ahead} ↓${st.branch.behind} ${st.branch.upstream}</span>` : nothing}` : nothing}
      <span class="spacer"></span>
      <button ?disabled=${scm.loading || !scm.usable()} @click=${() => scm.refresh()}>${scm.loading ? 'Reading…' : 'Refresh'}</button>
    </div>
    ${!scm.usable()
      ? html`<p class="muted pad" role="status">Git runs inside the Session's environment; it is not usable now. ${app.runtimeState(s.id).reason}</p>`
      : scm.notRepo
        ? html`<div class="empty small" role="status"><h2>Not a Git repository</h2>
            <p>This Session's folder, <code>${s.working_dir}</code>, is not the top of a Git repository, so there is no
              status, diff or commit to show. Run <code>git init</code> there (in a terminal) to start one.</p></div>`
        : scm.error
          ? html`<p class="banner error" role="alert">Could not read the Git status: ${scm.error}</p>`
          : st ? html`${st.worktree ? worktreeView(scm, s, st) : nothing}${isRemote(s) ? syncView(scm, s, st) : nothing}${statusView(app, scm, st)}` : html`<p class="muted pad">Reading the status…</p>`}
    ${checkView(app, scm, s)}
  </div>`;
}

function statusView(app, scm, st) {
  const staged = st.files.filter((f) => f.staged);
  const changes = st.files.filter((f) => f.unstaged || f.conflict);
  const busy = !!scm.busy;
  const who = scm.identity;
  const unknown = !!who && !who.known;
  return html`
    <form class="commit-box pad" @submit=${(e) => { e.preventDefault(); if (!unknown) scm.commit(); }}>
      ${who && who.known ? html`<p class="muted small commit-identity">Commits as <span class="mono">${identityText(who)}</span></p>`
        : unknown ? html`<div class="banner error commit-identity" role="alert"><p>No commit identity is known, so Commit is off.</p>
            <p class="small">${who.fix}</p></div>`
          : scm.identityError ? html`<p class="muted small commit-identity">Could not read the commit identity: ${scm.identityError}</p>` : nothing}
      <label>Commit message <textarea class="mono" rows="2" .value=${live(scm.message)} @input=${(e) => { scm.message = e.target.value; }}
        @keydown=${(e) => { if (e.key === 'Enter' && mod(e)) { e.preventDefault(); e.target.form.requestSubmit(); } }}
        placeholder="Describe the change (${modKey}-Enter commits)"></textarea></label>
      <div class="row">
        <label class="check"><input type="checkbox" .checked=${live(scm.stageAll)} @change=${(e) => { scm.stageAll = e.target.checked; app.update(); }}> Stage every change first</label>
        <span class="spacer"></span>
        <button type="submit" class="primary" ?disabled=${busy || scm.loading || unknown || (!staged.length && !scm.stageAll)}
          title=${unknown ? 'No commit identity is known' : staged.length || scm.stageAll ? `Commit (${modKey}-Enter)` : 'Stage something first'}>${commitLabel(staged.length, scm.stageAll, scm.busy === 'Committing')}</button>
      </div>
      ${scm.commitError ? html`<p class="error-text commit-error" role="alert" ${ref(nearby)}>⚠ ${scm.commitError}</p>` : nothing}
    </form>
    ${st.last_turn_known ? nothing : html`<p class="muted small pad">The last turn's changes are not known, so no file is marked “last turn”.</p>`}
    ${st.truncated ? html`<p class="muted small pad">Showing ${st.files.length.toLocaleString('en-US')} of ${st.total.toLocaleString('en-US')} changed paths.</p>` : nothing}
    <section class="scm-group" aria-label="Staged changes">
      <div class="row group-head"><h3>Staged changes <span class="muted">(${st.staged})</span></h3><span class="spacer"></span>
        <button ?disabled=${busy || !staged.length} @click=${() => scm.unstagePaths([])}>Unstage all</button></div>
      ${fileList(scm, staged, true)}
    </section>
    <section class="scm-group" aria-label="Changes">
      <div class="row group-head"><h3>Changes <span class="muted">(${st.unstaged + st.conflicts})</span></h3><span class="spacer"></span>
        <button ?disabled=${busy || !changes.length} @click=${() => scm.stagePaths([])}>Stage all</button>
        <button class="danger" ?disabled=${busy || !changes.some((f) => f.unstaged && f.unstaged !== 'untracked')} @click=${() => scm.discardPath('')}>Discard all…</button></div>
      ${fileList(scm, changes, false)}
    </section>
    ${scm.selected ? diffView(scm) : nothing}
    ${branchesView(scm)}`;
}

/**
 * worktreeView is the block a worktree Session's Source Control starts
 * with: where its branch stands against the Workspace's, the files a merge
 * would change, Merge and Squash named for what they do, and the last
 * merge's outcome or refusal right there.
 */
function worktreeView(scm, s, st) {
  const wt = st.worktree;
  const files = wt.files || [];
  const blocked = mergeBlocker(wt, st.files);
  const busy = !!scm.busy;
  const going = (k) => scm.busy === (k === 'squash' ? 'Squashing' : 'Merging');
  const off = busy || scm.loading || !!blocked;
  return html`<section class="worktree pad" aria-label="Merge into the Workspace">
    <p class="worktree-where"><span class="mono" title="This Session's own branch, in its own worktree">⎇ ${s.branch || st.branch.head}</span>
      · <span class="worktree-ahead">${aheadText(wt)}</span></p>
    ${files.length
      ? html`<p class="small">Files the merge changes:</p>
        <ul class="scm-files merge-files" aria-label="Files the merge changes">${files.map((f) => html`<li class="scm-file">
          <span class="state mono" title=${FILE_STATE[f.status] || f.status}>${f.status}</span><span class="mono">${f.orig_path ? `${f.orig_path} → ` : ''}${f.path}</span>
          <span class="sr-only">, ${FILE_STATE[f.status] || f.status}</span></li>`)}</ul>`
      : nothing}
    ${wt.ahead ? html`<label>Squash message (optional) <input class="mono" .value=${live(scm.mergeMessage)}
        @input=${(e) => { scm.mergeMessage = e.target.value; }}></label>
      <div class="row end merge-actions">
        <button ?disabled=${off} @click=${() => scm.merge('squash')}>${mergeLabel('squash', wt, going('squash'))}</button>
        <button class="primary" ?disabled=${off} @click=${() => scm.merge('merge')}>${mergeLabel('merge', wt, going('merge'))}</button>
      </div>` : nothing}
    ${blocked && wt.ahead ? html`<p class="muted small merge-why">${blocked}</p>` : nothing}
    ${scm.mergeRefused ? html`<div class="banner error merge-refused" role="alert" ${ref(nearby)}>
        <p>⚠ The merge was refused: ${scm.mergeRefused.reason.replace(/\.$/, '')}.</p>
        ${scm.mergeRefused.files.length ? html`<ul class="mono small">${scm.mergeRefused.files.map((f) => html`<li>${f}</li>`)}</ul>` : nothing}
      </div>` : nothing}
    ${scm.merged ? html`<p class="ok-text merge-done" role="status">✓ ${mergedText(scm.merged)}.</p>` : nothing}
  </section>`;
}

/**
 * syncView is the block a remote Session's Source Control starts with: the
 * branch its work comes home to, the commits a sync brings, Sync named for
 * what it does, and the last sync's outcome or refusal right there.
 */
function syncView(scm, s, st) {
  const branch = homeBranch(s);
  const blocked = syncBlocker(s, st);
  const going = scm.busy === 'Syncing';
  const brought = syncCommits(st);
  const refused = refusalNow(scm.syncRefused, st);
  return html`<section class="worktree remote-sync pad" aria-label="Bring the work home">
    <p class="sync-where"><span class="mono" title="The clone runs on the remote engine; its commits come home to this branch of the Workspace repository">⛁ ${branch}</span></p>
    <p class="small sync-brings">${syncBrings(s, st, scm.branches)}</p>
    ${brought.list.length ? html`<ol class="scm-files sync-commits" aria-label="Commits the sync brings">${brought.list.map((c) => html`<li class="scm-file" title=${c.title}><span class="mono">${c.commit}</span> ${c.subject}</li>`)}${brought.more ? html`<li class="muted small">…and ${brought.more} older</li>` : nothing}</ol>` : nothing}
    <div class="row end merge-actions">
      <button class="primary sync-btn" ?disabled=${!!scm.busy || scm.loading || s.environment?.state !== 'ready'} @click=${() => scm.sync()}>${going ? 'Syncing…' : `Sync to branch ${branch}`}</button>
    </div>
    ${blocked && !refused ? html`<p class="muted small sync-why">${blocked}</p>` : nothing}
    ${refused ? html`<div class="banner error sync-refused" role="alert" ${ref(nearby)}><p>⚠ ${refused}</p></div>` : nothing}
    ${scm.synced ? html`<p class="ok-text sync-done" role="status">✓ ${syncedText(scm.synced)}.</p>` : nothing}
  </section>`;
}

function fileList(scm, files, staged) {
  if (!files.length) return html`<p class="muted small pad">None.</p>`;
  const busy = !!scm.busy;
  return html`<ul class="scm-files">
    ${files.map((f) => {
      const state = staged ? f.staged : f.conflict ? `conflict ${f.conflict}` : f.unstaged;
      const cur = scm.selected?.path === f.path && scm.selected.staged === staged;
      return html`<li class="scm-file" data-path=${f.path}>
        <button class="tree-item" aria-current=${cur ? 'true' : 'false'} title="Show the ${staged ? 'staged' : 'unstaged'} diff of ${f.path}"
          @click=${() => scm.select(f.path, staged)}>
          <span class="state mono" title=${state}>${STATE_MARK[state] || '!'}</span>
          <span class="mono">${f.orig_path ? `${f.orig_path} → ` : ''}${f.path}</span>
          <span class="sr-only">, ${state}</span>
          ${f.last_turn ? html`<span class="last-turn" title="The last turn changed this file">◆ last turn</span>` : nothing}
        </button>
        ${staged
          ? html`<button class="small" ?disabled=${busy} aria-label="Unstage ${f.path}" @click=${() => scm.unstagePaths([f.path])}>Unstage</button>`
          : html`<button class="small" ?disabled=${busy} aria-label="Stage ${f.path}" @click=${() => scm.stagePaths([f.path])}>Stage</button>
            ${f.unstaged && f.unstaged !== 'untracked'
              ? html`<button class="small danger" ?disabled=${busy} aria-label="Discard changes to ${f.path}…" @click=${() => scm.discardPath(f.path)}>Discard…</button>`
              : nothing}`}
      </li>`;
    })}
  </ul>`;
}

function diffView(scm) {
  const sel = scm.selected;
  const h = scm.hunks;
  const busy = !!scm.busy;
  return html`<section class="scm-diff" aria-label="Diff of ${sel.path}">
    <div class="row group-head"><h3 class="mono">${sel.path}</h3><span class="muted small">${sel.staged ? 'staged (index against HEAD)' : 'unstaged (worktree against index)'}</span>
      <span class="spacer"></span><button class="icon" aria-label="Close the diff" @click=${() => { scm.selected = null; scm.app.update(); }}>×</button></div>
    ${scm.stale ? html`<p class="banner error" role="alert">⚠ ${scm.stale}</p>` : nothing}
    ${scm.diffError ? html`<p class="banner error" role="alert">Could not read the diff: ${scm.diffError}</p>` : nothing}
    ${!h ? (scm.diffError ? nothing : html`<p class="muted pad">Reading the diff…</p>`)
      : h.binary ? html`<p class="muted pad">A binary file: its change is not shown.</p>`
        : !h.hunks.length ? html`<p class="muted pad">No ${sel.staged ? 'staged' : 'unstaged'} change${h.untracked ? ' (an untracked file: stage it whole)' : ''}.</p>`
          : html`<ol class="hunks">${h.hunks.map((k) => html`<li class="hunk" role="group" aria-label="Hunk ${k.index + 1}">
              <div class="row hunk-head"><code>${k.header}</code><span class="spacer"></span>
                ${h.untracked && !sel.staged ? html`<span class="muted small untracked-why">A new file: Git stages it whole, not by hunk.
                  <button type="button" class="link small" ?disabled=${busy} @click=${() => scm.stagePaths([sel.path])}>Stage the file</button></span>` : nothing}
                <button class="small" ?disabled=${busy || h.untracked} title=${h.untracked ? 'A new file is staged whole: use Stage the file' : ''} @click=${() => scm.hunk(k)}>${sel.staged ? 'Unstage hunk' : 'Stage hunk'}</button>
                ${sel.staged ? nothing : html`<button class="small danger" ?disabled=${busy || h.untracked} @click=${() => scm.discardHunk(k)}>Discard hunk…</button>`}
              </div>
              ${lineDiffView(scm.app, hunkPatch(k), `Lines of hunk ${k.index + 1}`, { session: scm.session, path: sel.path, source: sel.staged ? 'staged' : 'Source Control' })}
            </li>`)}</ol>`}
  </section>`;
}

/** hunkPatch is a hunk as the diff view reads a patch, made once per hunk read. */
function hunkPatch(k) {
  k.patch ??= { diff: [k.header, ...k.lines].join('\n') };
  return k.patch;
}

function branchesView(scm) {
  const b = scm.branches;
  if (!b) return nothing;
  const busy = !!scm.busy;
  return html`<section class="scm-group" aria-label="Branches">
    <div class="row group-head"><h3>Branches</h3></div>
    <ul class="scm-files">
      ${b.branches.map((r) => html`<li class="scm-file">
        <span class="mono">${r.current ? '● ' : ''}${r.name}</span>
        <span class="muted small grow" title=${r.commit}>${r.subject}</span>
        ${r.current ? html`<span class="small">current</span>`
          : html`<button class="small" ?disabled=${busy} aria-label="Check out ${r.name}" @click=${() => scm.checkout(r.name)}>Check out</button>`}
      </li>`)}
    </ul>
  </section>`;
}

function checkView(app, scm, s) {
  const r = scm.check;
  const cmd = scm.checkDraft ?? s.check_command ?? '';
  return html`<section class="scm-group pad" aria-label="Check">
    <h3>Check</h3>
    <p class="muted small">A command that says whether the work is good (tests, a linter); it runs in the environment at the Session root.</p>
    <form class="row" @submit=${(e) => { e.preventDefault(); scm.runCheck(s); }}>
      <label class="grow">Check command <input class="mono" .value=${live(cmd)} placeholder="make test"
        @input=${(e) => { scm.checkDraft = e.target.value; app.update(); }}></label>
      <button type="button" ?disabled=${scm.checkDraft === null} @click=${() => scm.saveCheck(s)}>Save</button>
      <button type="submit" class="primary" ?disabled=${scm.checking || !cmd.trim() || !scm.usable()}>${scm.checking ? 'Running…' : 'Run'}</button>
    </form>
    ${r ? html`<div class="check-result" role="status">
        <p class=${r.passed ? 'ok-text' : 'error-text'}>${r.passed ? '✓ Passed' : '✕ Failed'}: exit code ${r.exit_code}${r.timed_out ? ' (timed out)' : ''}
          in ${(r.duration_ms / 1000).toFixed(1)} s</p>
        ${r.error ? html`<p class="error-text small">${r.error}</p>` : nothing}
        <pre class="output" aria-label="Check output">${r.output_tail}</pre>
      </div>` : nothing}
  </section>`;
}
