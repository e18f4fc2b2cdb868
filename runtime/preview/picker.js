// Lathe Preview picker bridge. The daemon injects it into every HTML page
// of a Preview (at /.lathe/preview-picker.js on the Preview origin, or at
// /api/sessions/<id>/proxy/<port>/lathe-tap.js on the legacy path proxy).
// It lets the workbench pick an element of the page and get back a
// reference snapshot, which becomes a `context_references` entry of the
// next turn.
//
// Protocol: window.postMessage only, one JSON-compatible object per
// message, every one carrying {protocol: "lathe-picker", version: 1, type}.
//
//   workbench -> preview   {type: "ping"}
//                          {type: "start", request_id?}  enter pick mode
//                          {type: "stop"}                leave it quietly
//   preview -> workbench   {type: "ready", url, title}   on load and per ping
//                          {type: "picked", request_id, reference}
//                          {type: "cancelled", request_id}  Escape, or a new start
//
//   reference = {url, title, selector, tag, text, attributes: {name: value},
//                bbox: {x, y, width, height},      CSS px, the frame's viewport
//                viewport: {width, height, scroll_x, scroll_y, device_pixel_ratio},
//                source: {file, line?, column?, component?, via} | null}
//
// `source` is a best-effort hint from what dev builds leave on the DOM:
// data-lathe-source / data-source ("file:line:col"), react-dev-inspector,
// vite-plugin-vue-inspector and Astro attributes, React fibers'
// _debugSource, Vue's __file, Svelte's __svelte_meta; `via` names which.
//
// Origin rules, both ways:
// - The bridge talks only to window.parent, and only when framed. It
//   accepts a message only if event.source is window.parent and
//   event.origin is the workbench origin, and it posts with that origin as
//   targetOrigin. The workbench origin is derived from where the page is
//   served: on a Preview host "<session>-p<port>.localhost:<p>" it is
//   "<scheme>://localhost:<p>"; on the legacy path proxy it is the page
//   URL's own scheme://host (the page runs with an opaque origin there).
// - The workbench must accept a message only if event.source is that
//   iframe's contentWindow and event.origin is the Preview origin
//   "http://<session>-p<port>.localhost:<p>" (for the legacy proxy, whose
//   response CSP sandboxes the page, the origin is "null": check source).
//   It posts to the Preview origin as targetOrigin ("*" only for the
//   legacy proxy, since an opaque origin cannot be named).
(() => {
  "use strict";
  if (window.__lathePicker || window.parent === window) return;
  window.__lathePicker = true;

  const PROTOCOL = "lathe-picker";
  const VERSION = 1;
  const MAX_TEXT = 300;
  const onPreviewHost = /^[0-9a-z]{26}-p[1-9][0-9]{0,4}\.localhost$/i.test(location.hostname);
  const workbench = onPreviewHost
    ? location.protocol + "//localhost" + (location.port ? ":" + location.port : "")
    : location.protocol + "//" + location.host;

  const send = (msg) => {
    window.parent.postMessage(Object.assign({ protocol: PROTOCOL, version: VERSION }, msg), workbench);
  };
  const ready = () => send({ type: "ready", url: location.href, title: document.title });

  // ---- pick mode -------------------------------------------------------
  let picking = null; // {request_id, box, hovered}

  const start = (requestID) => {
    if (picking) cancel();
    const box = document.createElement("div");
    box.setAttribute("data-lathe-picker-overlay", "");
    box.style.cssText = "position:fixed;pointer-events:none;z-index:2147483647;" +
      "outline:2px solid #2f81f7;background:rgba(47,129,247,.12);display:none;box-sizing:border-box";
    document.documentElement.appendChild(box);
    picking = { request_id: requestID === undefined ? null : requestID, box, hovered: null };
    addEventListener("mousemove", onMove, true);
    addEventListener("click", onClick, true);
    addEventListener("keydown", onKey, true);
    for (const t of ["mousedown", "mouseup", "pointerdown", "pointerup"]) addEventListener(t, swallow, true);
  };

  const stop = () => {
    if (!picking) return;
    picking.box.remove();
    picking = null;
    removeEventListener("mousemove", onMove, true);
    removeEventListener("click", onClick, true);
    removeEventListener("keydown", onKey, true);
    for (const t of ["mousedown", "mouseup", "pointerdown", "pointerup"]) removeEventListener(t, swallow, true);
  };

  const cancel = () => {
    const id = picking ? picking.request_id : null;
    stop();
    send({ type: "cancelled", request_id: id });
  };

  const swallow = (ev) => { ev.preventDefault(); ev.stopPropagation(); };

  const onMove = (ev) => {
    const el = document.elementFromPoint(ev.clientX, ev.clientY);
    if (!el || el === picking.box) return;
    picking.hovered = el;
    const r = el.getBoundingClientRect();
    Object.assign(picking.box.style, {
      display: "block", left: r.left + "px", top: r.top + "px", width: r.width + "px", height: r.height + "px",
    });
  };

  const onClick = (ev) => {
    swallow(ev);
    const el = document.elementFromPoint(ev.clientX, ev.clientY) || picking.hovered;
    const id = picking.request_id;
    stop();
    if (el) send({ type: "picked", request_id: id, reference: snapshot(el) });
  };

  const onKey = (ev) => {
    if (ev.key !== "Escape") return;
    swallow(ev);
    cancel();
  };

  // ---- the reference snapshot -------------------------------------------
  const snapshot = (el) => {
    const r = el.getBoundingClientRect();
    const attributes = {};
    for (const name of ["id", "class", "name", "type", "role", "aria-label", "href", "src", "alt", "title", "placeholder", "data-testid"]) {
      const v = el.getAttribute(name);
      if (v !== null) attributes[name] = v.slice(0, MAX_TEXT);
    }
    return {
      url: location.href,
      title: document.title,
      selector: selectorOf(el),
      tag: el.tagName.toLowerCase(),
      text: (el.innerText || el.textContent || "").replace(/\s+/g, " ").trim().slice(0, MAX_TEXT),
      attributes,
      bbox: { x: r.x, y: r.y, width: r.width, height: r.height },
      viewport: {
        width: innerWidth, height: innerHeight, scroll_x: scrollX, scroll_y: scrollY,
        device_pixel_ratio: devicePixelRatio,
      },
      source: sourceOf(el),
    };
  };

  // selectorOf is a CSS selector that matches el alone: the nearest
  // ancestor-or-self with a unique id, then tag:nth-of-type steps.
  const selectorOf = (el) => {
    const steps = [];
    for (let n = el; n && n.nodeType === 1; n = n.parentElement) {
      if (n.id && document.querySelectorAll("#" + CSS.escape(n.id)).length === 1) {
        steps.unshift("#" + CSS.escape(n.id));
        break;
      }
      let step = n.tagName.toLowerCase();
      const parent = n.parentElement;
      if (parent) {
        const same = Array.from(parent.children).filter((c) => c.tagName === n.tagName);
        if (same.length > 1) step += ":nth-of-type(" + (same.indexOf(n) + 1) + ")";
      }
      steps.unshift(step);
      if (step === "html") break;
    }
    return steps.join(" > ");
  };

  const fileLoc = (s, via) => {
    const m = /^(.*?)(?::(\d+))?(?::(\d+))?$/.exec(String(s));
    const out = { file: m[1], via };
    if (m[2]) out.line = Number(m[2]);
    if (m[3]) out.column = Number(m[3]);
    return out;
  };

  // sourceOf walks up from el to the first element that carries a hint.
  const sourceOf = (el) => {
    for (let n = el, depth = 0; n && n.nodeType === 1 && depth < 30; n = n.parentElement, depth++) {
      for (const a of ["data-lathe-source", "data-source", "data-v-inspector"]) {
        const v = n.getAttribute(a);
        if (v) return fileLoc(v, a);
      }
      const rdi = n.getAttribute("data-inspector-relative-path");
      if (rdi) {
        const out = { file: rdi, via: "react-dev-inspector" };
        const line = Number(n.getAttribute("data-inspector-line"));
        const col = Number(n.getAttribute("data-inspector-column"));
        if (line) out.line = line;
        if (col) out.column = col;
        return out;
      }
      const astro = n.getAttribute("data-astro-source-file");
      if (astro) {
        const [line, column] = (n.getAttribute("data-astro-source-loc") || "").split(":").map(Number);
        return Object.assign({ file: astro, via: "astro" }, line ? { line } : {}, column ? { column } : {});
      }
      const svelte = n.__svelte_meta && n.__svelte_meta.loc;
      if (svelte && svelte.file) {
        return { file: svelte.file, line: svelte.line + 1, column: svelte.column + 1, via: "svelte" };
      }
      const vue = n.__vueParentComponent || (n.__vue__ && { type: n.__vue__.$options });
      if (vue && vue.type && vue.type.__file) {
        return { file: vue.type.__file, component: vue.type.name || vue.type.__name || undefined, via: "vue" };
      }
      const key = Object.keys(n).find((k) => k.startsWith("__reactFiber$") || k.startsWith("__reactInternalInstance$"));
      for (let f = key ? n[key] : null; f; f = f.return) {
        if (f._debugSource) {
          const t = f.type;
          return {
            file: f._debugSource.fileName, line: f._debugSource.lineNumber, column: f._debugSource.columnNumber,
            component: (t && (t.displayName || t.name)) || undefined, via: "react",
          };
        }
      }
    }
    return null;
  };

  // ---- wiring ----------------------------------------------------------
  addEventListener("message", (ev) => {
    if (ev.source !== window.parent || ev.origin !== workbench) return;
    const d = ev.data;
    if (!d || typeof d !== "object" || d.protocol !== PROTOCOL) return;
    if (d.type === "ping") ready();
    else if (d.type === "start") start(d.request_id);
    else if (d.type === "stop") stop();
  });
  if (document.readyState === "loading") addEventListener("DOMContentLoaded", ready, { once: true });
  else ready();
})();
