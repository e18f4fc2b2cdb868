// Line diffs for the workbench's one diff view (ui/diffview.js): jsdiff's
// line diff, loaded when the first diff renders.
export { diffLines, structuredPatch } from 'diff';
