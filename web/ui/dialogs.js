// Modal dialogs (native <dialog>: focus is trapped and Esc closes): the
// folder picker, a new Session, renames, and the second step of everything
// destructive, which names exactly what will be lost.

import { html, nothing, live, ref } from '/vendor/lit.js';
import * as S from './store.js';
import { ApiError, api, path, sessionPath } from './api.js';
import { nameProblem, needsRecursive, targetDir } from './filerules.js';
import { count, deleteWords, discardFiles, isolationChoice, sharing } from './worktreerules.js';
import { homeWords, isRemote, remoteProbe, templateWords } from './remoterules.js';

export class Dialogs {
  constructor(app) {
    this.app = app;
    this.current = null; // {kind, ...state}
    this.busy = false;
    this.error = '';
  }

  open(kind, opts = {}) {
    this.app.ui.railOpen = false; // a dialog opened from the off-canvas rail replaces it
    this.current = { kind, ...opts };
    this.error = '';
    this.busy = false;
    if (kind === 'workspace') this.browse(opts.path, { choose: !!opts.path });
    if (kind === 'session') this.initSession();
    if (kind === 'delete-session') this.readWorktree();
    if (kind === 'rename-session') this.current.value = this.app.state.sessions.get(opts.session)?.name || '';
    if (kind === 'rename-workspace') this.current.value = this.app.state.workspaces.get(opts.workspace)?.name || '';
    this.app.update();
  }

  close() {
    this.current = null;
    this.app.update();
  }

  /**
   * confirm is the one confirmation style: an in-page dialog that names
   * what will change; action runs on the dialog's button, and a refusal
   * shows in the dialog, in words.
   */
  confirm({ title, body, label, action, cls = 'danger' }) {
    this.open('confirm', { title, body, label, action, cls });
  }

  /** submit runs a dialog's action, keeping the dialog open with its error on failure. */
  async submit(action) {
    if (this.busy) return;
    this.busy = true;
    this.error = '';
    this.app.update();
    try {
      await action();
      this.current = null;
    } catch (err) {
      if (err.status === 401) this.app.fail(err);
      this.error = err.message;
    } finally {
      this.busy = false;
      this.app.update();
    }
  }

  // Folder picker ------------------------------------------------------------

  /**
   * browse lists a folder. The picker opens on the home folder with nothing
   * chosen: a folder is chosen for registration only by the user's own
   * step (opening it, typing its path, or "Choose this folder"), so a bare
   * Enter never registers the home directory.
   */
  async browse(dir, { choose = true } = {}) {
    const d = this.current;
    d.loading = true;
    this.app.update();
    try {
      const listing = await api('GET', path('/api/fs/list', { path: dir, hidden: d.hidden ? 'true' : undefined }));
      if (this.current !== d) return;
      d.listing = listing;
      d.path = listing.path;
      d.chosen = choose ? listing.path : '';
      d.error = '';
      d.probe = null;
      api('GET', path('/api/fs/project', { path: listing.path }))
        .then((p) => { if (this.current === d && d.path === p.path) { d.probe = p; this.app.update(); } })
        .catch(() => {});
    } catch (err) {
      if (this.current !== d) return;
      d.error = err.message;
    } finally {
      d.loading = false;
      this.app.update();
    }
  }

  async register() {
    const d = this.current;
    if (!d.chosen || d.loading) return; // nothing chosen yet: Enter does not register the folder on show
    let w = null;
    await this.submit(async () => {
      const body = { path: d.chosen };
      if (d.name?.trim()) body.name = d.name.trim();
      w = await api('POST', '/api/workspaces', body);
      S.setWorkspace(this.app.state, w);
      this.app.toast(`Workspace “${w.name}” registered.`);
    });
    // Straight on to its first Session.
    if (w && !this.error) this.open('session', { workspace: w.id });
  }

  // New Session --------------------------------------------------------------

  initSession() {
    const d = this.current;
    const st = this.app.state;
    const cur = this.app.ui.route.session && st.sessions.get(this.app.ui.route.session);
    d.workspace ??= cur?.workspace_id || S.workspaceList(st)[0]?.id;
    d.name = '';
    d.mode ??= 'single_agent';
    d.workers = null; // a lattice Session's narrowed team, or null for every Worker
    d.agent = this.app.ui.agents[0]?.agent_id || '';
    d.envMode = 'auto'; // 'auto': the devcontainer when there is one, else the default image; 'custom'
    d.image = '';
    d.setup = '';
    d.approve = false;
    d.ports = '';
    d.isolation = ''; // the user's choice; '' follows the default (isolationFor)
    this.probeWorkspace();
  }

  /** isolationFor is the New Session dialog's isolation choice for its Workspace (ui/worktreerules.js). */
  isolationFor(d) {
    if (remoteProbe(d.probe)) return { value: 'shared', off: '', why: '' }; // every remote Session is a clone of its own already
    return isolationChoice(d.probe, sharing([...this.app.state.sessions.values()], d.workspace), d.isolation);
  }

  probeWorkspace() {
    const d = this.current;
    const w = this.app.state.workspaces.get(d.workspace);
    d.probe = null;
    d.isolation = ''; // another Workspace: its own default
    if (!w) return;
    api('GET', path('/api/fs/project', { path: w.path }))
      .then((p) => { if (this.current === d && d.workspace === w.id) { d.probe = p; this.app.update(); } })
      .catch((err) => { if (this.current === d && d.workspace === w.id) { d.probe = { error: err.message }; this.app.update(); } });
  }

  /**
   * readWorktree reads a worktree Session's Git status for its delete
   * confirmation, which names the uncommitted files lost and whether the
   * branch is kept. Unreadable (its environment is down, say), the dialog
   * says what it cannot know.
   */
  readWorktree() {
    const d = this.current;
    const s = this.app.state.sessions.get(d.session);
    if (s?.isolation !== 'worktree') return;
    d.reading = true;
    api('GET', sessionPath(s.id, '/git/status'))
      .then((st) => { d.status = st; })
      .catch((err) => { d.statusError = err.message; })
      .finally(() => { d.reading = false; if (this.current === d) this.app.update(); });
  }

  createSession() {
    const d = this.current;
    return this.submit(async () => {
      const body = { name: d.name.trim() };
      if (this.isolationFor(d).value === 'worktree') body.isolation = 'worktree'; // shared is the default
      body.mode = d.mode === 'lattice' ? latticeMode(d.workers) : { kind: 'single_agent', agent_id: d.agent };
      if (d.ports.trim()) {
        body.exposed_ports = d.ports.split(/[\s,]+/).filter(Boolean).map((p) => {
          const n = Number(p);
          if (!Number.isInteger(n)) throw new Error(`exposed port “${p}” is not a number`);
          return n;
        });
      }
      const remote = remoteProbe(d.probe);
      if (d.envMode === 'custom' || (remote && d.setup.trim())) {
        if (d.image.trim() && !remote) body.image = d.image.trim(); // under remote the template is the only image
        body.setup_command = d.setup.trim();
        if (body.setup_command) {
          // Checked: a reviewed approval of this exact text. Unchecked: left
          // for review, so the Session waits in awaiting_approval.
          body.setup_approved = d.approve;
          body.setup_reviewed = d.approve;
        }
      }
      const s = await api('POST', `/api/workspaces/${encodeURIComponent(d.workspace)}/sessions`, body);
      S.setSession(this.app.state, s);
      this.app.openSession(s.id);
    });
  }

  // Session and Workspace actions ----------------------------------------------

  reopen(id) {
    api('POST', sessionPath(id, '/reopen'))
      .then((s) => { S.setSession(this.app.state, s); this.app.syncRuntime(); this.app.update(); })
      .catch((err) => this.app.fail(err, 'Reopen'));
  }
}

// ---------------------------------------------------------------------------
// Views

/**
 * showModal is the ref callback that opens a rendered <dialog> once. lit
 * calls it before the element is in the document, so it opens a microtask
 * later.
 */
export function showModal(el) {
  if (el && !el.open) queueMicrotask(() => { if (el.isConnected && !el.open) el.showModal(); });
}

export function dialogView(app) {
  const dl = app.dialogs;
  const d = dl.current;
  if (!d) return nothing;
  const body = VIEWS[d.kind]?.(app, d);
  if (!body) return nothing;
  return html`<dialog class="modal ${d.kind}" aria-labelledby="dialog-title" ${ref(showModal)}
      @close=${() => { if (dl.current === d) dl.close(); }}>
    ${body}
    ${dl.error ? html`<p class="error-text" role="alert">⚠ ${dl.error}</p>` : nothing}
  </dialog>`;
}

const cancel = (app) => html`<button type="button" @click=${() => app.dialogs.close()}>Cancel</button>`;

const VIEWS = {
  workspace: pickerView,
  session: newSessionView,
  'rename-session': (app, d) => renameView(app, d, 'Rename Session', async (name) => {
    S.setSession(app.state, await api('PATCH', sessionPath(d.session), { name }));
  }),
  'rename-workspace': (app, d) => renameView(app, d, 'Rename Workspace', async (name) => {
    S.setWorkspace(app.state, await api('PATCH', `/api/workspaces/${encodeURIComponent(d.workspace)}`, { name }));
  }),
  'close-session': (app, d) => {
    const s = app.state.sessions.get(d.session);
    if (!s) return null;
    return confirmView(app, 'Close this Session?', html`${isRemote(s) ? html`<p class="remote-home">${homeWords(s, 'closes')}
      Reopening starts from that branch.</p>` : nothing}<p>Closing <b>${s.name}</b> stops its environment: running
      terminals and tasks end, and unsaved editor changes are lost. Its history and record stay, and it can be reopened.</p>`,
    'Close Session', async () => {
      S.setSession(app.state, await api('DELETE', sessionPath(s.id)));
      app.syncRuntime();
    });
  },
  'delete-session': (app, d) => {
    const s = app.state.sessions.get(d.session);
    if (!s) return null;
    const worktree = s.isolation === 'worktree';
    const lost = worktree ? discardFiles(d.status?.files).length : 0;
    return confirmView(app, 'Delete this Session?', html`${isRemote(s) ? html`<p class="remote-home">${homeWords(s, 'is deleted')}</p>` : nothing}<p>Deleting <b>${s.name}</b> removes its record, its
      conversation history and its environment for good. Running terminals and tasks end.${worktree ? '' : html` The files in
      <code>${s.working_dir}</code> stay.`}</p>
      ${worktree ? html`<div class="delete-worktree" role="status">${d.reading ? html`<p class="muted">Reading its Git status…</p>`
        : deleteWords(s, d.status).map((line) => html`<p>${line}</p>`)}
        ${d.statusError ? html`<p class="muted small">Its Git status could not be read (${d.statusError}), so the files are not named.</p>` : nothing}</div>` : nothing}`,
    lost ? `Delete and discard ${count(lost, 'file')}` : 'Delete Session', async () => {
      const r = await deleteSession(app, s, d);
      app.state.sessions.delete(s.id);
      app.go({ session: null });
      if (r?.kept_branch) app.toast(`Branch ${typeof r.kept_branch === 'string' ? r.kept_branch : s.branch} was kept: it has commits the Workspace’s branch lacks.`);
    }, 'danger');
  },
  rewind: (app, d) => {
    const log = app.state.turns.get(d.session);
    const i = log ? log.turns.findIndex((t) => t.turn_id === d.turn) : -1;
    if (i < 0) return null;
    const later = log.turns.length - i - 1;
    return confirmView(app, 'Rewind the conversation?', html`<p>Rewinding hides the ${later} later
      turn${later === 1 ? '' : 's'} from this conversation and from what the Agent sees next. Files the turns changed
      stay as they are now.</p>`, 'Rewind', () => app.conversation.rewind(d.session, d.turn), 'danger');
  },
  'edit-resend': (app, d) => {
    const log = app.state.turns.get(d.session);
    const i = log ? log.turns.findIndex((t) => t.turn_id === d.turn) : -1;
    if (i < 0) return null;
    const later = log.turns.length - i - 1;
    const dl = app.dialogs;
    return html`<form @submit=${(e) => { e.preventDefault(); dl.submit(() => app.conversation.editResend(d.session, d.turn, d.value.trim())); }}>
      <h2 id="dialog-title">Edit and resend?</h2>
      <label>Message <textarea rows="4" required .value=${live(d.value)} @input=${(e) => { d.value = e.target.value; }} autofocus></textarea></label>
      <p>Resending rewinds the conversation to before this message: it${later ? html` and the ${later} later turn${later === 1 ? '' : 's'}` : ''}
        leave the conversation and what the Agent sees next. <strong>Files stay as they are now</strong>: nothing the turns
        changed is undone.</p>
      <div class="row end">${cancel(app)}<button type="submit" class="primary" ?disabled=${dl.busy || !d.value?.trim()}>${dl.busy ? 'Working…' : 'Rewind and resend'}</button></div>
    </form>`;
  },
  overwrite: (app, d) => confirmView(app, 'Overwrite the file on disk?', html`<p>The version of <code>${d.path}</code>
    on disk changed since you opened it. Overwriting replaces that version, and whatever changed it, with your
    editor’s text.</p>`, 'Overwrite', async () => { await app.files.save(true); }, 'danger'),
  confirm: (app, d) => confirmView(app, d.title, d.body, d.label, d.action, d.cls),
  'file-new': fileNewView,
  'file-rename': fileRenameView,
  'file-delete': fileDeleteView,
  'session-actions': (app, d) => {
    const s = app.state.sessions.get(d.session);
    if (!s) return null;
    const dl = app.dialogs;
    return html`<h2 id="dialog-title">Session ${s.name}</h2>
      <p class="muted small"><code>${s.working_dir}</code> · created ${new Date(s.created_at).toLocaleString()}</p>
      <div class="row">
        <button @click=${() => dl.open('rename-session', { session: s.id })}>Rename…</button>
        ${s.status === 'closed'
          ? html`<button @click=${() => { dl.close(); dl.reopen(s.id); }}>Reopen</button>`
          : html`<button @click=${() => dl.open('close-session', { session: s.id })}>Close…</button>`}
        <button class="danger" @click=${() => dl.open('delete-session', { session: s.id })}>Delete…</button>
        ${cancel(app)}
      </div>`;
  },
  'workspace-actions': (app, d) => {
    const w = app.state.workspaces.get(d.workspace);
    if (!w) return null;
    const n = [...app.state.sessions.values()].filter((s) => s.workspace_id === w.id).length;
    return html`<h2 id="dialog-title">Workspace ${w.name}</h2>
      <p><code>${w.path}</code></p>
      <div class="row">
        <button @click=${() => app.dialogs.open('rename-workspace', { workspace: w.id })}>Rename…</button>
        <button class="danger" ?disabled=${n > 0} @click=${() => app.dialogs.open('remove-workspace', { workspace: w.id })}>Remove…</button>
        ${cancel(app)}
      </div>
      ${n > 0 ? html`<p class="muted small">It has ${n} Session${n === 1 ? '' : 's'}; delete them before removing it.</p>` : nothing}`;
  },
  'remove-workspace': (app, d) => {
    const w = app.state.workspaces.get(d.workspace);
    if (!w) return null;
    return confirmView(app, 'Remove this Workspace?', html`<p>Removing <b>${w.name}</b> forgets the registration
      of <code>${w.path}</code>. The folder and its files stay.</p>`, 'Remove Workspace', async () => {
      await api('DELETE', `/api/workspaces/${encodeURIComponent(w.id)}`);
      app.state.workspaces.delete(w.id);
    }, 'danger');
  },
};

/**
 * deleteSession force-deletes s. A worktree Session's uncommitted files
 * go only when named (discard_files): the ones its status showed in the
 * dialog. When the daemon's list differs, its 409 names its own; the
 * dialog then shows those, and a second Delete sends exactly them.
 */
async function deleteSession(app, s, d) {
  const discard = s.isolation === 'worktree' ? discardFiles(d.status?.files) : [];
  // While the delete runs, nothing re-reads the Session's parts: its
  // environment's brackets arrive as frames before the answer, and a read
  // then would meet the record gone.
  app.state.deleting.add(s.id);
  try {
    return await api('DELETE', path(sessionPath(s.id), { force: 'true' }), discard.length ? { discard_files: discard } : undefined);
  } catch (err) {
    app.state.deleting.delete(s.id);
    if (err instanceof ApiError && err.status === 409 && Array.isArray(err.body?.files)) {
      d.status = { ...d.status, files: err.body.files.map((p) => ({ path: p })) };
      throw new ApiError(409, `${err.message}. The files are named above now; Delete again discards exactly them.`, err.body);
    }
    throw err;
  }
}

/** pathForm is a dialog that asks for one path below the Session root, saying in words what is wrong with it. */
function pathForm(app, d, title, label, submit, action, intro = nothing) {
  const dl = app.dialogs;
  const problem = nameProblem(d.value || '');
  return html`<form @submit=${(e) => { e.preventDefault(); if (!nameProblem(d.value || '')) dl.submit(() => action(d.value)); }}>
    <h2 id="dialog-title">${title}</h2>
    ${intro}
    <label>${label} <input class="mono" name="path" required .value=${live(d.value || '')} autofocus
      @input=${(e) => { d.value = e.target.value; d.touched = true; app.update(); }}></label>
    ${d.touched && problem ? html`<p class="muted small">${problem}</p>` : nothing}
    <div class="row end">${cancel(app)}<button type="submit" class="primary" ?disabled=${dl.busy || !!problem}>${dl.busy ? 'Working…' : submit}</button></div>
  </form>`;
}

function fileNewView(app, d) {
  const dir = targetDir(d.selected);
  if (d.value === undefined) d.value = dir === '.' ? '' : `${dir}/`;
  const what = d.entryKind === 'dir' ? 'folder' : 'file';
  return pathForm(app, d, `New ${what}`, `Path of the new ${what}`, `Create ${what}`,
    (p) => app.files.create(p, d.entryKind),
    html`<p class="muted small">Relative to the Session folder; the folder that holds it must exist.</p>`);
}

function fileRenameView(app, d) {
  const from = d.entry.path;
  return pathForm(app, d, `Rename ${from}`, 'New path', 'Rename', (to) => app.files.rename(from, to));
}

function fileDeleteView(app, d) {
  const e = d.entry;
  const dl = app.dialogs;
  const dir = e.type === 'dir';
  const listing = app.files.dirs.get(e.path);
  const needs = needsRecursive(e, listing);
  const n = listing?.entries?.length;
  const action = () => app.files.remove(e.path, dir && !!d.recursive);
  return html`<form method="dialog" @submit=${(ev) => { ev.preventDefault(); if (!needs || d.recursive) dl.submit(action); }}>
    <h2 id="dialog-title">Delete ${e.path}?</h2>
    <p>${dir ? html`The folder <code>${e.path}</code>` : html`The file <code>${e.path}</code>`} is deleted from the Session folder for good;
      the Files tree has no undo${dir ? '' : ', though Git can bring back a committed version'}.</p>
    ${needs ? html`<p>${n ? `It holds ${n}${listing.truncated ? ' or more' : ''} entr${n === 1 ? 'y' : 'ies'}.` : 'It may hold files and folders.'}
        A folder with contents is deleted only with everything in it.</p>
      <label class="check"><input type="checkbox" .checked=${live(!!d.recursive)} @change=${(ev) => { d.recursive = ev.target.checked; app.update(); }}>
        Delete everything inside it too</label>` : nothing}
    <div class="row end">${cancel(app)}<button type="submit" class="danger" ?disabled=${dl.busy || (needs && !d.recursive)}>${dl.busy ? 'Working…' : 'Delete'}</button></div>
  </form>`;
}

function confirmView(app, title, body, label, action, cls = 'primary') {
  const dl = app.dialogs;
  return html`<form method="dialog" @submit=${(e) => { e.preventDefault(); dl.submit(action); }}>
    <h2 id="dialog-title">${title}</h2>
    ${body}
    <div class="row end">${cancel(app)}<button type="submit" class=${cls} ?disabled=${dl.busy} autofocus>${dl.busy ? 'Working…' : label}</button></div>
  </form>`;
}

function renameView(app, d, title, save) {
  const dl = app.dialogs;
  return html`<form @submit=${(e) => { e.preventDefault(); dl.submit(() => save(d.value.trim())); }}>
    <h2 id="dialog-title">${title}</h2>
    <label>Name <input name="name" required .value=${live(d.value)} @input=${(e) => { d.value = e.target.value; }} autofocus></label>
    <div class="row end">${cancel(app)}<button type="submit" class="primary" ?disabled=${dl.busy}>Rename</button></div>
  </form>`;
}

function pickerView(app, d) {
  const dl = app.dialogs;
  const l = d.listing;
  const p = d.probe;
  return html`<form @submit=${(e) => { e.preventDefault(); dl.register(); }}>
    <h2 id="dialog-title">Add a Workspace</h2>
    <p class="muted small">Choose a folder on the daemon’s machine. Sessions in it run in sandboxes that see this folder.</p>
    <div class="row bottom">
      <label class="grow">Folder <input class="mono" name="path" .value=${live(d.path || '')} @input=${(e) => { d.path = e.target.value; d.chosen = ''; }}
        @keydown=${(e) => { if (e.key === 'Enter') { e.preventDefault(); dl.browse(d.path); } }}></label>
      <button type="button" @click=${() => dl.browse(d.path)}>Go</button>
    </div>
    <div class="picker" aria-busy=${d.loading ? 'true' : 'false'}>
      ${d.error ? html`<p class="error-text small" role="alert">⚠ ${d.error}</p>` : nothing}
      ${l ? html`<ul class="dir-list" aria-label="Folders in ${l.path}">
        ${l.parent ? html`<li><button type="button" class="tree-item dir" @click=${() => dl.browse(l.parent)}>↑ ..</button></li>` : nothing}
        ${l.entries.map((e) => html`<li><button type="button" class="tree-item dir" @click=${() => dl.browse(e.path)}>
          ${e.name}/${e.is_git_repo ? html` <span class="muted small">git</span>` : nothing}</button></li>`)}
        ${!l.entries.length ? html`<li class="muted small pad">No folders here.</li>` : nothing}
      </ul>` : html`<p class="muted pad">Loading…</p>`}
    </div>
    <label class="check"><input type="checkbox" .checked=${!!d.hidden} @change=${(e) => { d.hidden = e.target.checked; dl.browse(d.path, { choose: !!d.chosen }); }}> Show hidden folders</label>
    ${p ? html`<p class="small">${p.is_git_repo ? 'A Git repository. ' : ''}${p.devcontainer ? html`Devcontainer: <code>${p.devcontainer.path}</code>. ` : ''}${p.guidance?.length ? `${p.guidance.length} guidance file(s). ` : ''}</p>` : nothing}
    <label>Name <span class="muted small">(optional; defaults to the folder name)</span>
      <input name="name" .value=${live(d.name || '')} @input=${(e) => { d.name = e.target.value; }}></label>
    ${l && !d.chosen
      ? html`<p class="small picker-choose">No folder chosen yet: open one above, or
          <button type="button" class="link" @click=${() => { d.chosen = l.path; app.update(); }}>choose this folder (<code>${l.path}</code>)</button>.</p>`
      : nothing}
    <div class="row end">${cancel(app)}<button type="submit" class="primary" ?disabled=${dl.busy || d.loading || !d.chosen}>Register ${d.chosen ? html`<code>${basenameOf(d.chosen)}</code>` : 'a folder'}</button></div>
  </form>`;
}

function basenameOf(p) {
  const parts = p.split('/').filter(Boolean);
  return parts.length ? parts[parts.length - 1] : '/';
}

function newSessionView(app, d) {
  const dl = app.dialogs;
  const workspaces = S.workspaceList(app.state);
  const agents = app.ui.agents;
  const p = d.probe;
  const dc = p?.devcontainer;
  const detected = p?.detected_setup || [];
  const set = (k, after) => (e) => { d[k] = e.target.type === 'checkbox' ? e.target.checked : e.target.value; after?.(); app.update(); };
  return html`<form @submit=${(e) => { e.preventDefault(); dl.createSession(); }}>
    <h2 id="dialog-title">New Session</h2>
    <label>Workspace
      <select name="workspace" .value=${live(d.workspace || '')} @change=${set('workspace', () => dl.probeWorkspace())}>
        ${workspaces.map((w) => html`<option value=${w.id} ?selected=${w.id === d.workspace}>${w.name} — ${w.path}</option>`)}
      </select></label>
    <label>Name <input name="name" required .value=${live(d.name)} @input=${set('name')} placeholder="fix the login bug" autofocus></label>
    ${isolationView(app, d, set)}
    <fieldset>
      <legend>Agent</legend>
      ${app.ui.lattice?.workers?.length
        ? html`<div class="row mode-choice" role="radiogroup" aria-label="Who works in it">
            <label class="check"><input type="radio" name="mode" value="single_agent" .checked=${d.mode === 'single_agent'} @change=${set('mode')}> One Agent</label>
            <label class="check"><input type="radio" name="mode" value="lattice" .checked=${d.mode === 'lattice'} @change=${set('mode')}> A team (Lattice)</label>
          </div>`
        : nothing}
      ${d.mode === 'single_agent'
        ? html`<label>Agent <select name="agent" .value=${live(d.agent)} @change=${set('agent')}>
            ${agents.map((a) => html`<option value=${a.agent_id} ?selected=${a.agent_id === d.agent}>${a.name || a.agent_id} · ${a.model}</option>`)}
          </select></label>`
        : latticeTeamView(app, d)}
    </fieldset>
    ${remoteProbe(p) ? remoteEnvView(d, set) : html`<fieldset>
      <legend>Environment</legend>
      <label class="check"><input type="radio" name="env" value="auto" .checked=${d.envMode === 'auto'} @change=${set('envMode')}>
        ${dc ? html`Use the devcontainer (<code>${dc.path}</code>${dc.image ? html`, image <code>${dc.image}</code>` : ''})` : 'The daemon’s default image, no setup command'}</label>
      ${d.envMode === 'auto' && dc?.post_create_command
        ? html`<p class="small">Its setup command <code>${dc.post_create_command}</code> needs your approval in the environment review
            unless the operator approves devcontainer commands by default.</p>`
        : nothing}
      <label class="check"><input type="radio" name="env" value="custom" .checked=${d.envMode === 'custom'} @change=${set('envMode')}> Choose the image and setup command</label>
      ${d.envMode === 'custom'
        ? html`<label>Image <input name="image" class="mono" .value=${live(d.image)} @input=${set('image')} placeholder="the daemon’s default image"></label>
          <label>Setup command <textarea name="setup" class="mono" rows="2" .value=${live(d.setup)} @input=${set('setup')} placeholder="none"></textarea></label>
          ${detected.length ? html`<p class="small">Detected: ${detected.map((x) => html`<button type="button" class="link" @click=${() => { d.setup = x.command; app.update(); }}><code>${x.command}</code></button> <span class="muted">(${x.file})</span> `)}</p>` : nothing}
          <label class="check"><input type="checkbox" name="approve" .checked=${live(d.approve)} @change=${set('approve')} ?disabled=${!d.setup.trim()}>
            Approve this exact setup command now (otherwise the Session waits for your review)</label>`
        : nothing}
      ${portsField(d, set)}
    </fieldset>`}
    <div class="row end">${cancel(app)}<button type="submit" class="primary" ?disabled=${dl.busy || !d.workspace || (d.mode === 'lattice' && d.workers?.length === 0)}>${dl.busy ? 'Creating…' : 'Create Session'}</button></div>
  </form>`;
}

/** portsField is the New Session dialog's exposed ports. */
function portsField(d, set) {
  return html`<label>Exposed ports <input name="ports" class="mono" .value=${live(d.ports)} @input=${set('ports')} placeholder="e.g. 3000, 8000"></label>`;
}

/**
 * remoteEnvView is the Environment under the remote sandbox provider: no
 * image field (the operator's template is the only image, named from the
 * probe), the setup command and the ports.
 */
function remoteEnvView(d, set) {
  return html`<fieldset class="remote-env">
    <legend>Environment</legend>
    <p class="small remote-template">${templateWords(d.probe)} Its code is a clone of the Workspace (last commit and uncommitted
      changes), brought home from Source Control as branch <code>lathe/…</code>.</p>
    <label>Setup command <textarea name="setup" class="mono" rows="2" .value=${live(d.setup)} @input=${set('setup')} placeholder="none"></textarea></label>
    <label class="check"><input type="checkbox" name="approve" .checked=${live(d.approve)} @change=${set('approve')} ?disabled=${!d.setup.trim()}>
      Approve this exact setup command now (otherwise the Session waits for your review)</label>
    ${portsField(d, set)}
  </fieldset>`;
}

/**
 * isolationView is where the Session's code lives, in words: the
 * Workspace folder itself, or its own git worktree on branch lathe/<id>.
 * The worktree is off, with the reason, for a folder that is not a Git
 * repository; it is the default when another open Session already works
 * in the folder, and the dialog says so.
 */
function isolationView(app, d, set) {
  if (remoteProbe(d.probe)) return nothing; // remoteEnvView says where its code lives: a clone on the engine
  const w = app.state.workspaces.get(d.workspace);
  const c = app.dialogs.isolationFor(d);
  return html`<fieldset class="isolation-choice" role="radiogroup" aria-label="Where its code lives">
    <legend>Where its code lives</legend>
    <label class="check"><input type="radio" name="isolation" value="shared" .checked=${c.value === 'shared'} @change=${set('isolation')}>
      <span>Shared folder: works in <code>${w?.path || 'the Workspace folder'}</code> itself, beside every other Session there</span></label>
    <label class="check"><input type="radio" name="isolation" value="worktree" .checked=${c.value === 'worktree'} ?disabled=${!!c.off} @change=${set('isolation')}>
      <span>Own copy of the repository, on branch <code>lathe/…</code> (a git worktree from the Workspace’s last commit, merged back from Source Control)</span></label>
    ${c.off ? html`<p class="muted small why isolation-off">${c.off}</p>` : c.why ? html`<p class="small why isolation-why">${c.why}</p>` : nothing}
  </fieldset>`;
}

/** agentName is how the workbench names an Agent: its name, else its ID. */
export function agentName(app, id) {
  const a = app.ui.agents.find((x) => x.agent_id === id);
  return a?.name || id;
}

/**
 * latticeMode is a lattice Session's mode: the whole configured team, or
 * the Workers the dialog narrowed it to.
 */
export function latticeMode(workers) {
  return workers ? { kind: 'lattice', workers } : { kind: 'lattice' };
}

/** latticeTeamView explains the team in one sentence and lets the dialog narrow its Workers. */
function latticeTeamView(app, d) {
  const team = app.ui.lattice || { workers: [] };
  const chosen = d.workers || team.workers;
  const toggle = (w) => (e) => {
    const next = e.target.checked ? [...chosen, w] : chosen.filter((x) => x !== w);
    // Every Worker again is the whole team: no narrowing recorded.
    d.workers = team.workers.every((x) => next.includes(x)) ? null : team.workers.filter((x) => next.includes(x));
    app.update();
  };
  return html`<p class="small lattice-explain">${team.coordinator
      ? html`The coordinator <b>${agentName(app, team.coordinator)}</b> plans each turn and hands its parts to the Workers you tick below; you can also address one Worker alone from the composer.`
      : html`No coordinator is configured, so each turn goes to one Worker you pick in the composer (the first ticked one by default).`}</p>
    <fieldset class="lattice-workers"><legend class="small">Workers in this Session</legend>
      ${team.workers.map((w) => html`<label class="check"><input type="checkbox" name="worker" value=${w} .checked=${chosen.includes(w)} @change=${toggle(w)}> ${agentName(app, w)}</label>`)}
    </fieldset>
    ${chosen.length ? nothing : html`<p class="error-text small" role="alert">⚠ Tick at least one Worker.</p>`}`;
}
