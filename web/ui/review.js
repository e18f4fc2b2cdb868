// Review that talks back: comments on diff lines (Source Control's turn
// changes, a turn's write, a Ways Attempt) gather in a tray above the
// composer; Send to Agent starts the next turn with them as context
// references (file, lines, the quoted code and the note), which the turn's
// record journals, and the transcript shows them as one review card.

import { html, nothing } from '/vendor/lit.js';
import { linesText, trayWords, isReviewRef } from './reviewrules.js';

export class Review {
  constructor(app) {
    this.app = app;
    this.bySession = new Map(); // session → [{id, path, start, end, code, note, source}]
    this.seq = 0;
  }

  list(session) {
    return this.bySession.get(session) || [];
  }

  add(session, c) {
    this.bySession.set(session, [...this.list(session), { ...c, id: ++this.seq }]);
    this.app.update();
  }

  remove(session, id) {
    this.bySession.set(session, this.list(session).filter((c) => c.id !== id));
    this.app.update();
  }

  clear(session) {
    this.bySession.delete(session);
  }
}

/** reviewTrayView is the tray above the composer: the comments gathered, each removable, and Send to Agent. */
export function reviewTrayView(app, s, disabled) {
  const list = app.review.list(s.id);
  if (!list.length) return nothing;
  return html`<section class="review-tray" aria-label="Review comments">
    <div class="row"><b>${trayWords(list)}</b><span class="spacer"></span>
      <button type="button" class="primary" ?disabled=${disabled} title="Start the next turn with these comments (and what the composer holds)"
        @click=${() => app.conversation.sendReview(s.id)}>Send to Agent</button></div>
    <ul class="review-list small">
      ${list.map((c) => html`<li><code>${c.path}</code> ${linesText(c.start, c.end)} <span class="muted">(${c.source})</span>: ${c.note}
        <button type="button" class="icon" aria-label="Remove the comment on ${c.path} ${linesText(c.start, c.end)}" @click=${() => app.review.remove(s.id, c.id)}>×</button></li>`)}
    </ul>
  </section>`;
}

/** reviewCardView is a turn's review comments as one card in the transcript. */
export function reviewCardView(refs) {
  const list = refs.filter(isReviewRef);
  if (!list.length) return nothing;
  return html`<div class="review-card" role="group" aria-label="Review: ${trayWords(list.map((r) => ({ path: r.path })))}">
    <div class="small"><b>Review</b> · ${trayWords(list.map((r) => ({ path: r.path })))}</div>
    ${list.map((r) => html`<div class="review-item">
      <div class="small"><code>${r.path}</code> ${linesText(r.start_line, r.end_line)}${r.source ? html` <span class="muted">· ${r.source}</span>` : nothing}</div>
      <pre class="review-code">${r.text}</pre>
      <p class="review-note">${r.note}</p>
    </div>`)}
  </div>`;
}
