// Files: a lazy tree (the tree route lists one level per call) and a
// CodeMirror editor that saves through the file route with the sha256 it
// read, so a file changed underneath is a conflict the user resolves, never a
// silent overwrite. A selection becomes a context reference on the composer.

import { html, nothing, ref } from '/vendor/lit.js';
import { api, ApiError, path, sessionPath } from './api.js';
import { bytes, darkMode, mod, basename } from './util.js';
import { gitMarks, dirChanged } from './treemarks.js';
import { parentDir, renamedPath, within } from './filerules.js';

let cmModule = null;
/** loadCodeMirror loads the editor bundle once, on first use. */
function loadCodeMirror() {
  cmModule ??= import('/vendor/codemirror.js');
  return cmModule;
}

export class Files {
  constructor(app) {
    this.app = app;
    this.session = null;
    this.usable = false;
    this.dirs = new Map(); // dir path → {entries, loading, error, open, truncated}
    this.doc = null; // {path, sha256, size, binary, loading, error, dirty, saving, conflict, changedOnDisk}
    this.view = null; // the EditorView
    this.host = null; // the element the editor lives in
    this.cm = null; // the loaded CodeMirror module
    this.theme = null; // the theme Compartment
    this.original = null; // the Text last read or saved
    this.selection = null; // {start_line, end_line, text} of a non-empty selection
    this.mountRef = (el) => this.mount(el); // one callback, so lit calls it only when the element changes
    this.gen = 0; // bumps on every Session change, to drop stale answers
    this.opening = 0; // bumps on every open, to drop a superseded read
    this.tabs = []; // the open files' paths, in the editor's tab strip
    this.parked = new Map(); // path → {doc, state, original, theme} of a tab not shown, edits and all
    this.git = null; // path → {mark, word} of the checkout's changes; null while unknown
    this.notRepo = false; // the Session's folder is not a Git repository: no marks to ask for
    this.selected = null; // {path, type} of the entry last clicked in the tree: what Rename and Delete act on
    darkMode?.addEventListener('change', () => this.applyTheme());
  }

  setSession(id) {
    if (id === this.session) return;
    this.session = id;
    this.gen++;
    this.dirs = new Map();
    this.doc = null;
    this.selection = null;
    this.original = null;
    this.tabs = [];
    this.parked = new Map();
    this.git = null;
    this.notRepo = false;
    this.selected = null;
    if (this.view) {
      this.view.destroy();
      this.view = null;
    }
  }

  /** suspend keeps what is shown but refuses reads and saves. */
  suspend() {
    this.usable = false;
  }

  /** resume (re)binds to a usable runtime: reload the tree and check the open file. */
  resume() {
    this.usable = true;
    this.revalidate();
  }

  /** revalidate re-reads the open directories and the open file's state. */
  revalidate() {
    if (!this.usable || !this.session) return;
    const open = [...this.dirs.entries()].filter(([, d]) => d.open).map(([p]) => p);
    if (!open.includes('.')) open.unshift('.');
    for (const p of open) this.list(p);
    this.loadGit();
    if (this.doc?.error) this.open(this.doc.path, true); // it could not be read before
    else if (this.doc && !this.doc.loading) this.check();
  }

  async list(dir) {
    if (this.app.state.deleting.has(this.session)) return;
    const gen = this.gen;
    const d = this.dirs.get(dir) || { entries: null, open: true };
    d.loading = true;
    d.open = true;
    this.dirs.set(dir, d);
    this.app.update();
    try {
      const res = await api('GET', path(sessionPath(this.session, '/tree'), { path: dir }));
      if (gen !== this.gen) return;
      d.entries = res.entries;
      d.truncated = res.truncated;
      d.error = '';
    } catch (err) {
      if (gen !== this.gen) return;
      d.error = err.message;
      if (err instanceof ApiError && err.status === 404 && dir !== '.') this.dirs.delete(dir);
    } finally {
      d.loading = false;
      this.app.update();
    }
  }

  toggle(dir) {
    const d = this.dirs.get(dir);
    if (d && d.open) {
      d.open = false;
      this.app.update();
    } else {
      this.list(dir);
    }
  }

  /** open reads a file into the editor; again re-reads the one already open. */
  async open(p, again = false) {
    if (!this.session) return;
    if (!again && this.doc && this.doc.path === p && !this.doc.error) return;
    this.park();
    if (!this.tabs.includes(p)) this.tabs.push(p);
    const kept = !again && this.parked.get(p);
    if (kept) {
      // A tab opened before: its editor state, unsaved edits and all.
      this.parked.delete(p);
      this.doc = kept.doc;
      this.original = kept.original;
      this.theme = kept.theme;
      this.selection = null;
      if (kept.state && this.view) {
        this.view.setState(kept.state);
        this.applyTheme();
      }
      if (this.app.ui.route.file !== p) this.app.go({ session: this.session, tool: 'files', file: p });
      if (this.usable) this.check();
      this.app.update();
      return;
    }
    this.parked.delete(p);
    const gen = this.gen;
    const n = ++this.opening;
    this.doc = { path: p, loading: true };
    this.selection = null;
    this.app.update();
    if (this.app.ui.route.file !== p) {
      this.app.ui.inspector = 'files';
      this.app.go({ session: this.session, tool: 'files', file: p });
    }
    if (!this.usable) {
      this.doc = { path: p, error: 'The environment is not ready; the file opens once it is.' };
      this.app.update();
      return;
    }
    try {
      const [f, cm] = await Promise.all([api('GET', path(sessionPath(this.session, '/file'), { path: p })), loadCodeMirror()]);
      if (gen !== this.gen || n !== this.opening) return;
      this.cm = cm;
      this.doc = { path: p, sha256: f.sha256, size: f.size, binary: f.binary, modified: f.modified, dirty: false };
      if (!f.binary) await this.setContent(f.content, p);
    } catch (err) {
      if (gen !== this.gen || n !== this.opening) return;
      this.doc = { path: p, error: err.message };
    }
    this.app.update();
  }

  /** loadGit re-reads the checkout's Git status for the tree's marks. */
  async loadGit() {
    if (this.notRepo || !this.usable || !this.session) return;
    const gen = this.gen;
    try {
      const st = await api('GET', sessionPath(this.session, '/git/status'));
      if (gen !== this.gen) return;
      this.git = gitMarks(st.files);
    } catch (err) {
      if (gen !== this.gen) return;
      this.git = null;
      if (err instanceof ApiError && err.status === 409) this.notRepo = true;
    }
    this.app.update();
  }

  /** park keeps the shown file's editor state aside, to come back to its tab. */
  park() {
    const doc = this.doc;
    if (!doc || doc.loading || doc.error) return;
    this.parked.set(doc.path, { doc, state: doc.binary ? null : this.view?.state, original: this.original, theme: this.theme });
  }

  /** closeTab closes a file's tab, after a confirmation if it has unsaved edits. */
  closeTab(p, force = false) {
    const shown = this.doc?.path === p;
    const doc = shown ? this.doc : this.parked.get(p)?.doc;
    if (doc?.dirty && !force) {
      this.app.dialogs.confirm({
        title: `Close ${p}?`,
        body: html`<p>Your unsaved edits to <code>${p}</code> are discarded; the file on disk stays as it is.</p>`,
        label: 'Discard edits and close',
        action: async () => this.closeTab(p, true),
      });
      return;
    }
    const i = this.tabs.indexOf(p);
    this.tabs = this.tabs.filter((x) => x !== p);
    this.parked.delete(p);
    if (!shown) {
      this.app.update();
      return;
    }
    const next = this.tabs[Math.min(i, this.tabs.length - 1)];
    this.doc = null;
    this.selection = null;
    if (next) this.open(next);
    else {
      this.app.go({ session: this.session, tool: 'files' });
      this.app.update();
    }
  }

  /** check re-reads the open file's hash and flags a change on disk. */
  async check() {
    const doc = this.doc;
    const gen = this.gen;
    try {
      const f = await api('GET', path(sessionPath(this.session, '/file'), { path: doc.path }));
      if (gen !== this.gen || doc !== this.doc || f.sha256 === doc.sha256) return;
      if (!doc.dirty && !f.binary) {
        doc.sha256 = f.sha256;
        doc.size = f.size;
        await this.setContent(f.content, doc.path);
      } else {
        doc.changedOnDisk = true;
      }
    } catch (err) {
      if (gen === this.gen && doc === this.doc) doc.changedOnDisk = err instanceof ApiError && err.status === 404;
    }
    this.app.update();
  }

  async setContent(content, p) {
    const { EditorState, EditorView, Compartment, basicSetup, keymap, languages } = this.cm;
    const ext = basename(p).split('.').pop().toLowerCase();
    let lang = [];
    if (languages[ext]) {
      try {
        lang = await languages[ext]();
      } catch {
        lang = []; // highlighting is a nicety: edit without it
      }
    }
    this.theme = new Compartment();
    const state = EditorState.create({
      doc: content,
      extensions: [
        basicSetup,
        lang,
        this.theme.of(this.themeExtension()),
        keymap.of([{ key: 'Mod-s', preventDefault: true, run: () => { this.save(false); return true; } }]),
        EditorView.contentAttributes.of({ 'aria-label': `Editor: ${p}` }),
        EditorView.updateListener.of((u) => this.onUpdate(u)),
      ],
    });
    this.original = state.doc;
    if (this.view) this.view.setState(state);
    else this.view = new EditorView({ state });
    this.attach();
  }

  themeExtension() {
    return darkMode?.matches && this.cm ? this.cm.oneDark : [];
  }

  applyTheme() {
    if (this.view && this.theme) this.view.dispatch({ effects: this.theme.reconfigure(this.themeExtension()) });
  }

  onUpdate(u) {
    let changed = false;
    if (u.docChanged && this.doc) {
      const dirty = !u.state.doc.eq(this.original);
      changed = dirty !== this.doc.dirty;
      this.doc.dirty = dirty;
    }
    if (u.selectionSet || u.docChanged) {
      const sel = u.state.selection.main;
      const before = this.selection;
      if (sel.empty) this.selection = null;
      else {
        const doc = u.state.doc;
        this.selection = {
          start_line: doc.lineAt(sel.from).number,
          end_line: doc.lineAt(sel.to).number,
          text: doc.sliceString(sel.from, sel.to),
        };
      }
      changed ||= !!before !== !!this.selection || (before && this.selection && (before.start_line !== this.selection.start_line || before.end_line !== this.selection.end_line));
    }
    if (changed) this.app.update();
  }

  /** mount is the ref callback of the editor's host element. */
  mount(el) {
    this.host = el || null;
    this.attach();
  }

  attach() {
    if (this.view && this.host && this.view.dom.parentNode !== this.host) this.host.replaceChildren(this.view.dom);
  }

  /**
   * save writes the editor's text. Unless force, it sends the sha256 it
   * read: a file changed underneath answers 409 and becomes a conflict.
   */
  async save(force) {
    const doc = this.doc;
    if (!doc || !this.view || doc.saving || doc.binary) return;
    if (!this.usable) {
      this.app.toast('Cannot save: the environment is not ready.', 'error');
      return;
    }
    const content = this.view.state.doc.toString();
    const text = this.view.state.doc;
    doc.saving = true;
    this.app.update();
    const body = { content };
    if (!force) body.expected_sha256 = doc.sha256;
    try {
      const res = await api('POST', path(sessionPath(this.session, '/file'), { path: doc.path }), body);
      if (doc !== this.doc) return;
      doc.sha256 = res.sha256;
      doc.size = res.size;
      doc.conflict = '';
      doc.changedOnDisk = false;
      this.original = text;
      doc.dirty = !this.view.state.doc.eq(text);
      this.app.toast(`Saved ${doc.path}`);
      this.loadGit();
      this.app.scm.revalidate(); // the save changed the checkout Source Control shows
    } catch (err) {
      if (doc !== this.doc) return;
      if (err instanceof ApiError && err.status === 409 && !force) doc.conflict = err.message;
      else this.app.fail(err, `Saving ${doc.path}`);
    } finally {
      doc.saving = false;
      this.app.update();
    }
  }

  /** reload discards the edits and reads the file from disk. */
  reload() {
    this.doc.dirty = false;
    return this.open(this.doc.path, true);
  }

  /** reference sends the selection to the composer as a context reference. */
  reference() {
    if (!this.selection || !this.doc) return;
    this.app.conversation.addReference(this.session, { kind: 'editor', path: this.doc.path, sha256: this.doc.sha256, ...this.selection });
  }

  /**
   * create makes an empty file or a folder (kind "file" or "dir") at p,
   * then re-reads the tree and Source Control, and opens a new file. A
   * refusal throws, for the dialog to show in words.
   */
  async create(p, kind) {
    const e = await api('POST', sessionPath(this.session, '/files/create'), { path: p, kind });
    this.selected = { path: e?.path || p, type: kind === 'dir' ? 'dir' : 'file' };
    this.app.toast(`Created ${kind === 'dir' ? 'folder' : 'file'} ${p}`);
    this.afterChange(parentDir(p));
    if (kind === 'file') this.open(p);
  }

  /** rename moves from to to; open tabs under it follow. A refusal throws. */
  async rename(from, to) {
    await api('POST', sessionPath(this.session, '/files/rename'), { from, to });
    const type = this.selected?.path === from ? this.selected.type : 'file';
    this.selected = { path: to, type };
    const shown = this.doc?.path;
    this.tabs = this.tabs.map((p) => renamedPath(p, from, to));
    for (const [p, kept] of [...this.parked]) {
      if (!within(p, from)) continue;
      this.parked.delete(p);
      kept.doc.path = renamedPath(p, from, to);
      this.parked.set(kept.doc.path, kept);
    }
    if (shown && within(shown, from)) {
      this.doc.path = renamedPath(shown, from, to);
      this.app.go({ session: this.session, tool: 'files', file: this.doc.path });
    }
    for (const p of [...this.dirs.keys()]) if (within(p, from)) this.dirs.delete(p);
    this.app.toast(`Renamed ${from} to ${to}`);
    this.afterChange(parentDir(to), parentDir(from));
  }

  /** remove deletes p (a folder with contents only when recursive); its open tabs close. A refusal throws. */
  async remove(p, recursive) {
    await api('POST', sessionPath(this.session, '/files/delete'), recursive ? { path: p, recursive: true } : { path: p });
    if (this.selected && within(this.selected.path, p)) this.selected = null;
    const shown = this.doc?.path;
    this.tabs = this.tabs.filter((x) => !within(x, p));
    for (const x of [...this.parked.keys()]) if (within(x, p)) this.parked.delete(x);
    for (const x of [...this.dirs.keys()]) if (within(x, p)) this.dirs.delete(x);
    if (shown && within(shown, p)) {
      this.doc = null;
      this.selection = null;
      if (this.tabs.length) this.open(this.tabs.at(-1));
      else this.app.go({ session: this.session, tool: 'files' });
    }
    this.app.toast(`Deleted ${p}`);
    this.afterChange(parentDir(p));
  }

  /** afterChange re-reads the folders a tree change touched (opening them), the open ones, and Source Control. */
  afterChange(...dirs) {
    for (const d of dirs) {
      if (d === '.' || this.dirs.has(d)) continue;
      // A folder made along the way opens, so the new entry shows.
      let cur = '';
      for (const part of d.split('/')) {
        cur = cur ? `${cur}/${part}` : part;
        if (!this.dirs.get(cur)?.open) this.dirs.set(cur, { entries: null, open: true });
      }
    }
    this.revalidate();
    this.app.scm.revalidate();
  }

  /** knownFiles lists the file paths of the directories loaded so far (for quick open). */
  knownFiles() {
    const out = [];
    for (const d of this.dirs.values()) for (const e of d.entries || []) if (e.type !== 'dir') out.push(e.path);
    return out.sort();
  }
}

// ---------------------------------------------------------------------------
// Views

export function filesView(app, s) {
  const files = app.files;
  const rt = app.runtimeState(s.id);
  const root = files.dirs.get('.');
  return html`<div class="panel files-panel">
    <header class="panel-head">
      <h2>Files</h2>
      <span class="muted small path" title=${s.working_dir}>${s.working_dir}</span>
      <span class="spacer"></span>
      <button class="icon" aria-label="Refresh the tree" title="Refresh" ?disabled=${!rt.usable} @click=${() => files.revalidate()}>↻</button>
      <button class="icon" aria-label="Close Files" @click=${() => app.showTool('files')}>×</button>
    </header>
    ${!rt.usable ? html`<p class="banner ${rt.suspended ? '' : 'muted'}" role="status">${rt.suspended ? '◌ ' : ''}${rt.reason}${rt.suspended ? ' Files are suspended until it settles.' : ''}</p>` : nothing}
    <div class="files-split ${rt.usable ? '' : 'suspended'}" ?inert=${!rt.usable}>
      <div class="tree" role="navigation" aria-label="File tree">
        ${treeActions(app, files, rt)}
        ${root ? dirView(files, '.', root) : rt.usable ? html`<p class="muted pad">Loading…</p>` : nothing}
      </div>
      ${files.doc ? editorView(app, files) : html`<div class="editor-empty muted"><p>Open a file from the tree.</p></div>`}
    </div>
  </div>`;
}

/** treeActions are the tree's New file, New folder, Rename and Delete; the last two act on the selected entry. */
function treeActions(app, files, rt) {
  const sel = files.selected;
  const off = !rt.usable;
  return html`<div class="row tree-actions" role="toolbar" aria-label="File actions">
    <button class="small" ?disabled=${off} @click=${() => app.dialogs.open('file-new', { entryKind: 'file', selected: sel })}>New file</button>
    <button class="small" ?disabled=${off} @click=${() => app.dialogs.open('file-new', { entryKind: 'dir', selected: sel })}>New folder</button>
    <button class="small" ?disabled=${off || !sel} title=${sel ? `Rename ${sel.path}` : 'Select an entry in the tree first'}
      @click=${() => app.dialogs.open('file-rename', { entry: sel, value: sel.path })}>Rename…</button>
    <button class="small danger" ?disabled=${off || !sel} title=${sel ? `Delete ${sel.path}` : 'Select an entry in the tree first'}
      @click=${() => app.dialogs.open('file-delete', { entry: sel })}>Delete…</button>
    ${sel ? html`<span class="muted small selected-entry" title=${sel.path}>Selected: <span class="mono">${sel.path}${sel.type === 'dir' ? '/' : ''}</span></span>` : nothing}
  </div>`;
}

function dirView(files, dir, d) {
  if (d.error) return html`<p class="error-text small pad">⚠ ${d.error}</p>`;
  if (!d.entries) return html`<p class="muted small pad">Loading…</p>`;
  const current = files.doc?.path;
  return html`<ul class="tree-level" role="list">
    ${d.entries.filter((e) => !(e.type === 'dir' && e.name === '.git')).map((e) => { // Git's own folder is Source Control's
      if (e.type === 'dir') {
        const sub = files.dirs.get(e.path);
        const open = !!sub?.open;
        return html`<li><button class="tree-item dir" aria-expanded=${open ? 'true' : 'false'} @click=${() => { files.selected = { path: e.path, type: 'dir' }; files.toggle(e.path); }}>
            <span aria-hidden="true">${open ? '▾' : '▸'}</span> ${e.name}/${dirChanged(files.git, e.path)
              ? html` <span class="git-mark gm-dir" title="holds changes">•<span class="sr-only"> holds changes</span></span>` : nothing}</button>
          ${open && sub ? dirView(files, e.path, sub) : nothing}</li>`;
      }
      const kind = e.type === 'symlink' ? ' →' : e.type === 'other' ? ' (special)' : '';
      const gm = files.git?.get(e.path);
      return html`<li><button class="tree-item file" aria-current=${current === e.path ? 'true' : 'false'}
        ?disabled=${e.type === 'other'} title="${e.path} · ${bytes(e.size)}${gm ? ` · ${gm.word}` : ''}" @click=${() => { files.selected = { path: e.path, type: e.type }; files.open(e.path); }}>${e.name}${kind}${gm
          ? html` <span class="git-mark gm-${gm.mark === '!' ? 'conflict' : gm.mark}" aria-label=${gm.word}>${gm.mark}</span>` : nothing}</button></li>`;
    })}
    ${d.truncated ? html`<li class="muted small">… more entries not listed</li>` : nothing}
  </ul>`;
}

/** tabsView is the strip of open files; a dot marks unsaved edits. */
function tabsView(files, doc) {
  return html`<div class="editor-tabs" role="tablist" aria-label="Open files">
    ${files.tabs.map((p) => {
      const shown = doc.path === p;
      const dirty = shown ? doc.dirty : files.parked.get(p)?.doc.dirty;
      return html`<span class="editor-tab ${shown ? 'shown' : ''}">
        <button role="tab" aria-selected=${shown ? 'true' : 'false'} title=${p} @click=${() => files.open(p)}>${basename(p)}${dirty ? html` <span class="dirty" aria-label="unsaved">●</span>` : nothing}</button>
        <button class="icon" aria-label="Close ${p}" title="Close" @click=${() => files.closeTab(p)}>×</button></span>`;
    })}
  </div>`;
}

function editorView(app, files) {
  const doc = files.doc;
  const onKey = (e) => {
    // Ctrl/Cmd-S anywhere in the editor pane (CodeMirror's own binding
    // handles it inside the text, and marks it handled).
    if (!e.defaultPrevented && mod(e) && e.key.toLowerCase() === 's') {
      e.preventDefault();
      files.save(false);
    }
  };
  return html`<div class="editor" @keydown=${onKey}>
    ${files.tabs.length > 1 || (files.tabs.length === 1 && files.tabs[0] !== doc.path) ? tabsView(files, doc) : nothing}
    <div class="editor-bar">
      <span class="editor-path" title=${doc.path}>${doc.path}</span>
      ${doc.dirty ? html`<span class="dirty">● modified</span>` : nothing}
      ${doc.size !== undefined ? html`<span class="muted small">${bytes(doc.size)}</span>` : nothing}
      <span class="spacer"></span>
      ${files.selection
        ? html`<button @click=${() => files.reference()} title="Add the selected lines to the composer as context">
            Reference lines ${files.selection.start_line}–${files.selection.end_line}</button>`
        : nothing}
      <button class="primary" ?disabled=${!doc.dirty || doc.saving || doc.binary || !!doc.error} @click=${() => files.save(false)}
        title="Save (Ctrl-S)">${doc.saving ? 'Saving…' : 'Save'}</button>
    </div>
    ${doc.conflict
      ? html`<div class="banner error conflict" role="alert">
          <p><b>Conflict:</b> ${doc.path} changed on disk since you opened it, so it was not saved. ${doc.conflict}</p>
          <div class="row">
            <button @click=${() => files.reload()}>Reload from disk (discards your edits)</button>
            <button class="danger" @click=${() => app.dialogs.open('overwrite', { path: doc.path })}>Overwrite with my version…</button>
          </div>
        </div>`
      : doc.changedOnDisk
        ? html`<div class="banner warn" role="alert">⚠ ${doc.path} changed on disk while you edit it. Saving will report a conflict.
            <button class="link" @click=${() => files.reload()}>Reload from disk</button></div>`
        : nothing}
    ${doc.loading ? html`<p class="muted pad">Opening ${doc.path}…</p>` : nothing}
    ${doc.error ? html`<p class="error-text pad" role="alert">⚠ ${doc.error}</p>` : nothing}
    ${doc.binary ? html`<p class="muted pad">${doc.path} is a binary file (${bytes(doc.size)}); it is not shown.</p>` : nothing}
    <div class="editor-host" ?hidden=${!!doc.loading || !!doc.error || doc.binary} ${ref(files.mountRef)}></div>
  </div>`;
}
