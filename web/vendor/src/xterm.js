// xterm.js and its fit addon: the terminal dock. Loaded when the first
// terminal opens.
export { Terminal } from '@xterm/xterm';
export { FitAddon } from '@xterm/addon-fit';
