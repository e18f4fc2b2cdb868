// The workbench's tools, loaded after its first render: everything but
// the rail and the live state. app.js imports this module once the page
// can show the rail, and binds each tool when it has arrived (App.attach).

export { sessionView, Conversation } from './session.js';
export { envView, Environment } from './env.js';
export { filesView, Files } from './files.js';
export { dockView, Dock } from './dock.js';
export { dialogView, Dialogs } from './dialogs.js';
export { paletteView, Palette } from './palette.js';
export { approvalsView } from './approvals.js';
export { mcpView, Mcp } from './mcp.js';
export { scmView, Scm } from './scm.js';
export { previewView, Preview } from './preview.js';
export { historyView, History } from './history.js';
export { automationsView, interruptsView, Automations } from './automations.js';
export { chatsView, Chats } from './chats.js';
export { fileStoreView, FileStore } from './filestore.js';
export { waysView, Ways } from './ways.js';
export { Review } from './review.js';
