// The shared file store (#/files, in the centre): the files Chats attach
// from. Upload with tags, search by name, filter by tag, retag, download,
// and delete — refused, and said why, while a turn's history keeps the
// file. It is not the Session Files editor and shows no Workspace.

import { html, nothing, live, repeat } from '/vendor/lit.js';
import { api, path } from './api.js';
import { parseTags, deleteRefusal } from './chatrules.js';
import { readLatest } from './chats.js';
import { bytes, relTime } from './util.js';

const enc = encodeURIComponent;

export class FileStore {
  constructor(app) {
    this.app = app;
    this.files = null;
    this.q = '';
    this.tag = '';
    this.tags = ''; // tags for the next upload
    this.error = '';
    this.refusals = new Map(); // file id → why its delete was refused
    this.uploading = false;
    this.gen = 0;
    this.timer = 0;
  }

  show() {
    this.app.ui.railOpen = false;
    this.app.go({ view: 'files' });
  }

  isOpen() {
    return this.app.ui.route.view === 'files';
  }

  load() {
    return readLatest(this, path('/api/files', { q: this.q || undefined, tag: this.tag || undefined }), (files) => { this.files = files; });
  }

  /** changed hears a shared-file or chat event: the list re-reads. */
  changed() {
    if (!this.isOpen()) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.load(), 100);
  }

  filter(q, tag) {
    this.q = q;
    this.tag = tag;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.load(), 150);
  }

  async upload(files) {
    if (!files.length) return;
    this.uploading = true;
    this.app.update();
    try {
      for (const f of files) {
        const form = new FormData();
        for (const t of parseTags(this.tags)) form.append('tags', t);
        form.append('file', f, f.name);
        await api('POST', '/api/files', form);
      }
      this.app.toast(`Uploaded ${files.length === 1 ? files[0].name : `${files.length} files`}.`);
    } catch (err) {
      this.app.fail(err, 'Uploading');
    } finally {
      this.uploading = false;
    }
    this.load();
  }

  async retag(f, text) {
    try {
      await api('PATCH', `/api/files/${enc(f.id)}`, { tags: parseTags(text) });
    } catch (err) {
      this.app.fail(err, 'Retagging');
    }
    this.load();
  }

  async remove(f) {
    const n = f.chats.length;
    this.app.dialogs.confirm({
      title: `Delete ${f.name}?`,
      body: html`<p>${f.name} (${bytes(f.size)}) is removed from the shared store for good.${n ? ` It is attached to ${n} Chat${n === 1 ? '' : 's'}, which lose${n === 1 ? 's' : ''} it.` : ''}</p>`,
      label: 'Delete file',
      action: async () => {
        try {
          await api('DELETE', `/api/files/${enc(f.id)}`);
          this.refusals.delete(f.id);
        } catch (err) {
          if (err.status !== 409) throw err;
          this.refusals.set(f.id, deleteRefusal(err)); // history took it meanwhile: said beside the file
        }
        this.load();
      },
    });
  }
}

export function fileStoreView(app) {
  const m = app.filestore;
  return html`<div class="filestore panel" role="region" aria-label="Shared files">
    <div class="panel-head">
      <h1 class="mcp-title">Shared files</h1>
      <span class="grow"></span>
      <button @click=${() => m.load()}>Refresh</button>
      <a href="#/" class="button">Close</a>
    </div>
    <form class="row pad" aria-label="Upload" @submit=${(e) => e.preventDefault()}>
      <label>Tags for the upload <input .value=${live(m.tags)} placeholder="a, b" @input=${(e) => { m.tags = e.target.value; }}></label>
      <input id="store-upload" type="file" multiple hidden aria-label="Upload to the shared store"
        @change=${(e) => { m.upload([...e.target.files]); e.target.value = ''; }}>
      <button type="button" class="primary" ?disabled=${m.uploading} @click=${() => document.getElementById('store-upload').click()}>${m.uploading ? 'Uploading…' : 'Upload…'}</button>
      <span class="muted small">25 MiB a file, 10 MiB an image.</span>
    </form>
    <div class="row pad">
      <label class="grow"><span class="sr-only">Search the shared files</span>
        <input type="search" placeholder="Search names" .value=${live(m.q)} @input=${(e) => m.filter(e.target.value, m.tag)}></label>
      <label><span class="sr-only">Filter by tag</span>
        <input type="search" placeholder="Tag" .value=${live(m.tag)} @input=${(e) => m.filter(m.q, e.target.value.trim())}></label>
    </div>
    ${m.error ? html`<p class="error-text pad" role="alert">⚠ ${m.error}</p>` : nothing}
    ${m.files === null && !m.error ? html`<p class="muted pad">Loading…</p>` : nothing}
    ${m.files && !m.files.length ? html`<p class="muted pad small">${m.q || m.tag ? 'No file matches.' : 'No shared files yet.'}</p>` : nothing}
    <ul class="mcp-list store-list pad" aria-label="Shared files">
      ${repeat(m.files || [], (f) => f.id, (f) => html`<li class="store-file" data-file=${f.id}>
        <div class="row">
          <a class="mono" href="/api/files/${enc(f.id)}/bytes" download>${f.name}</a>
          <span class="muted small">${f.content_type} · ${bytes(f.size)} · ${relTime(f.created_at)}${f.chats.length ? ` · in ${f.chats.length} Chat${f.chats.length === 1 ? '' : 's'}` : ''}</span>
          ${f.retained ? html`<span class="badge st-awaiting_approval" title="A turn used it as context"><span class="dot" aria-hidden="true">⚓</span>kept by history</span>` : nothing}
          <span class="grow"></span>
          <label class="small">Tags <input class="store-tags" .value=${f.tags.join(', ')} aria-label="Tags of ${f.name}"
            title="Comma-separated; Enter saves" @keydown=${(e) => { if (e.key === 'Enter') e.target.blur(); }}
            @change=${(e) => m.retag(f, e.target.value)}></label>
          <button class="danger" ?disabled=${f.retained} title=${f.retained ? 'A turn used it as context, and that history needs it: it cannot be deleted' : `Delete ${f.name}`}
            @click=${() => m.remove(f)}>Delete…</button>
        </div>
        ${f.retained ? html`<p class="muted small kept-why">Delete is off: a turn used this file as context, and that history keeps it. A Chat can still let go of it.</p>` : nothing}
        ${m.refusals.get(f.id) ? html`<p class="error-text small" role="alert">⚠ ${m.refusals.get(f.id)}</p>` : nothing}
      </li>`)}
    </ul>
  </div>`;
}
