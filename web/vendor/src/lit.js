// lit-html: the workbench's templating. Loaded at start.
export { html, svg, render, nothing, noChange } from 'lit-html';
export { repeat } from 'lit-html/directives/repeat.js';
export { live } from 'lit-html/directives/live.js';
export { unsafeHTML } from 'lit-html/directives/unsafe-html.js';
export { ref, createRef } from 'lit-html/directives/ref.js';
export { classMap } from 'lit-html/directives/class-map.js';
export { ifDefined } from 'lit-html/directives/if-defined.js';
export { guard } from 'lit-html/directives/guard.js';
