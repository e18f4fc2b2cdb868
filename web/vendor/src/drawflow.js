// Drawflow: the node editor behind the Automation graph (and any graph the
// workbench draws: /lattice/graph.js wraps it). Loaded when a graph opens.
export { default as Drawflow } from 'drawflow';
