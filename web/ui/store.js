// The workbench's server state and the rules that change it. Nothing here
// touches the DOM or the network: app.js feeds it frames and HTTP answers,
// and the tests in web/uitest drive it directly.
//
// Honest state: records (Workspaces, Sessions) are the projection's, as the
// HTTP routes and the /ws `event` frames carry them; live state (environment
// transitions, Ways ownerships, runs, approvals) is replaced wholesale from
// each `snapshot`, and turn text streamed before a reconnect is replaced, not
// appended to, so a rehydrate never doubles it.

import { isPreviewRef, previewInput } from './refs.js';
import { isReviewRef, reviewInput } from './reviewrules.js';
import { LIFECYCLE, planOf, applyLifecycle } from './latticerules.js';

/** Environment states, in the order a Session usually moves through them. */
export const ENV_STATES = ['unprepared', 'awaiting_approval', 'preparing', 'ready', 'failed'];

/** Turn statuses that are still running. */
const LIVE = new Set(['sending', 'accepted', 'running']);

/** createState returns an empty state. */
export function createState() {
  return {
    seq: 0, // the journal seq of the last snapshot
    workspaces: new Map(),
    sessions: new Map(),
    deleting: new Set(), // session ids whose delete this client sent and awaits
    transitions: new Map(), // session id → generation whose runtime an owner holds
    ownerships: new Map(), // workspace id → {session, attempt_set_id}
    approvals: new Map(), // approval id → approval
    runs: [], // live runs from the snapshot
    turns: new Map(), // session id → TurnLog
    turnSession: new Map(), // turn id → session id
    pending: null, // event frames buffered while a hydrate is in flight
  };
}

// ---------------------------------------------------------------------------
// Connection: snapshot, hydrate, records

/**
 * applySnapshot replaces every piece of live state from a `snapshot` frame
 * and starts buffering `event` frames until finishHydrate, which the caller
 * runs once it has re-read the canonical records. It returns the IDs of the
 * Sessions whose turns must be re-read (their live turns ended while this
 * client was away, or are live now).
 */
export function applySnapshot(state, snap) {
  state.seq = snap.seq || 0;
  state.transitions = new Map((snap.environment_transitions || []).map((t) => [t.session, t.generation]));
  state.ownerships = new Map((snap.attempt_ownerships || []).map((o) => [o.workspace, o]));
  state.approvals = new Map((snap.approvals || []).map((a) => [a.approval_id, a]));
  state.runs = snap.runs || [];
  state.pending = [];

  const reread = new Set();
  const live = new Map(); // turn id → run
  for (const run of state.runs) {
    if (run.kind === 'session' && run.turn_id) live.set(run.turn_id, run);
  }
  for (const [sessionId, log] of state.turns) {
    for (const turn of log.turns) {
      const run = live.get(turn.turn_id);
      if (run) {
        replaceLiveText(turn, run);
        reread.add(sessionId);
      } else if (LIVE.has(turn.status) && turn.status !== 'sending') {
        // It ended while this client was away: the durable record has how.
        turn.status = 'stale';
        turn.rev++;
        reread.add(sessionId);
      }
    }
  }
  for (const [turnId, run] of live) {
    // A session run's workflow is its Session: on a first load the records
    // are read after the snapshot, so the Session need not be known yet.
    const sessionId = state.turnSession.get(turnId) || run.session || run.workflow;
    if (!sessionId) continue;
    state.turnSession.set(turnId, sessionId);
    const turn = ensureTurn(state, sessionId, turnId);
    replaceLiveText(turn, run);
    reread.add(sessionId);
  }
  return [...reread];
}

/**
 * replaceLiveText sets a live turn's Agent side to what the snapshot's run
 * holds: each Agent's reasoning and text buffers (everything streamed so
 * far) and the tool calls journaled so far. Frames after the snapshot then
 * append to it, so the text shows exactly once.
 */
function replaceLiveText(turn, run) {
  turn.parts = [];
  for (const a of run.agents || []) {
    if (a.reasoning) turn.parts.push({ kind: 'reasoning', agent: a.agent, text: a.reasoning });
    if (a.text) turn.parts.push({ kind: 'text', agent: a.agent, text: a.text });
  }
  turn.tools = (run.tool_calls || []).map(toolOf);
  for (const c of turn.tools) turn.parts.push({ kind: 'tool', tool: c });
  turn.lattice = run.subtasks ? planOf(run) : null; // a lattice turn's plan, once planned
  if (run.model) turn.ran = ranOf(run); // what runs it, once started
  turn.plan = run.plan ? planEntries(run.plan) : null;
  if (run.display_input) turn.display_input = run.display_input; // the user's message, in every tab
  turn.status = 'running';
  turn.rev++;
}

/**
 * finishHydrate replaces the records with the canonical lists read after the
 * snapshot, then applies the event frames that arrived meanwhile, in order:
 * each carries its record as of its own event, so the last one for a record
 * is the newest whichever of the two answers came first.
 */
export function finishHydrate(state, workspaces, sessions) {
  startRecords(state, workspaces, sessions);
  finishRecords(state);
}

/**
 * startRecords replaces the records with the Workspaces and the first page
 * of the Session list read after the snapshot; event frames stay buffered
 * until finishRecords, so the rail can show the first page while the rest
 * is read (addRecords).
 */
export function startRecords(state, workspaces, sessions) {
  state.workspaces = new Map(workspaces.map((w) => [w.id, w]));
  state.sessions = new Map(sessions.map((s) => [s.id, s]));
}

/** addRecords adds a later page of the Session list. */
export function addRecords(state, sessions) {
  for (const s of sessions) state.sessions.set(s.id, s);
}

/** finishRecords applies the event frames buffered since the snapshot, in order. */
export function finishRecords(state) {
  const pending = state.pending || [];
  state.pending = null;
  for (const f of pending) applyEvent(state, f);
}

/**
 * applyEvent applies one `event` frame: the changed record as of that event,
 * or its removal. While a hydrate is in flight the frame is buffered. It
 * returns the kind of change: 'workspace', 'session', 'task' or ''.
 */
export function applyEvent(state, f) {
  if (state.pending) {
    state.pending.push(f);
    return '';
  }
  if (!f.aggregate && LIFECYCLE.has(f.type)) {
    applyLatticeEvent(state, f);
    return '';
  }
  if (f.aggregate === 'workspace') {
    if (f.workspace) state.workspaces.set(f.workspace.id, f.workspace);
    else state.workspaces.delete(f.aggregate_id);
    return 'workspace';
  }
  if (f.aggregate === 'session') {
    if (f.session) state.sessions.set(f.session.id, f.session);
    else {
      state.sessions.delete(f.aggregate_id);
      state.transitions.delete(f.aggregate_id);
      state.turns.delete(f.aggregate_id);
    }
    return typeof f.type === 'string' && f.type.startsWith('session-task-') ? 'task' : 'session';
  }
  return '';
}

/**
 * applyEnvironmentFrame applies session-environment-changing (the Session's
 * runtime surfaces suspend) or -settled (they stay suspended until the caller
 * has re-read the Session: see settleSession). It returns the Session ID.
 */
export function applyEnvironmentFrame(state, f) {
  if (f.kind === 'session-environment-changing') state.transitions.set(f.session, f.generation);
  else state.transitions.delete(f.session);
  return f.session;
}

/** applyOwnershipFrame applies workspace-attempt-changing and -settled. */
export function applyOwnershipFrame(state, f) {
  if (f.kind === 'workspace-attempt-changing') {
    state.ownerships.set(f.workspace, { workspace: f.workspace, session: f.session, attempt_set_id: f.attempt_set_id });
    return;
  }
  // A settlement of an older set does not release a newer set's hold.
  const cur = state.ownerships.get(f.workspace);
  if (cur && cur.attempt_set_id === f.attempt_set_id) state.ownerships.delete(f.workspace);
}

/**
 * applyApprovalFrame applies an MCP approval frame. mcp-approval-required
 * adds a pending approval (the snapshot before it replaced them all);
 * mcp-approval-resolved, whoever decided and however (allow, deny,
 * cancelled, expired), removes it in every tab; mcp-approval-unknown (this
 * tab decided one that was no longer pending) removes it too. It returns a
 * notice for the person, or ''.
 */
export function applyApprovalFrame(state, f) {
  switch (f.kind) {
    case 'mcp-approval-required': {
      const { kind, ...a } = f;
      state.approvals.set(a.approval_id, a);
      touchTurn(state, a);
      return '';
    }
    case 'mcp-approval-resolved':
      touchTurn(state, state.approvals.get(f.approval_id));
      state.approvals.delete(f.approval_id);
      return '';
    case 'mcp-approval-unknown':
      touchTurn(state, state.approvals.get(f.approval_id));
      state.approvals.delete(f.approval_id);
      return 'That approval was already decided elsewhere.';
  }
  return '';
}

/** touchTurn marks the turn of approval a changed, so its tool card shows whether it waits. */
function touchTurn(state, a) {
  const sessionId = a?.turn_id && state.turnSession.get(a.turn_id);
  const t = sessionId && state.turns.get(sessionId)?.turns.find((x) => x.turn_id === a.turn_id);
  if (t) t.rev++;
}

/**
 * approvalFor is the pending approval a turn's unfinished tool call waits
 * for, or null: the call's name is mcp__<server>__<tool> and the approval
 * names its turn, Agent, server and tool.
 */
export function approvalFor(state, turnId, call) {
  if (call.phase === 'result') return null;
  for (const a of state.approvals.values()) {
    if (a.turn_id === turnId && `mcp__${a.server}__${a.tool}` === call.name && (!call.agent || !a.agent_id || call.agent === a.agent_id)) return a;
  }
  return null;
}

/**
 * markDecided records that this tab sent a decision on approval id (its
 * buttons wait for the resolution). A snapshot forgets the mark with the
 * approval: still pending then, the decision may not have arrived, so it
 * may be given again.
 */
export function markDecided(state, id, decision) {
  const a = state.approvals.get(id);
  if (a) a.sent = decision;
}

/** approvalsOf lists the pending approvals, oldest first; of one Session when sessionId is given. */
export function approvalsOf(state, sessionId) {
  const list = [...state.approvals.values()].filter((a) => !sessionId || a.session === sessionId);
  return list.sort((a, b) => (a.requested_at < b.requested_at ? -1 : a.requested_at > b.requested_at ? 1 : 0));
}

/** setSession stores a Session record a route answered with. */
export function setSession(state, s) {
  if (s && s.id) state.sessions.set(s.id, s);
}

/** setWorkspace stores a Workspace record a route answered with. */
export function setWorkspace(state, w) {
  if (w && w.id) state.workspaces.set(w.id, w);
}

// ---------------------------------------------------------------------------
// Derived state

/**
 * runtimeState says whether a Session's runtime surfaces (Files, Terminal,
 * Git, Preview) may be used: {usable, reason}. They are suspended while a
 * lifecycle owner holds the boundary (a transition in the snapshot or a
 * changing frame, or an owner on the record) or a Ways set owns the
 * Workspace, and unavailable unless the environment is ready.
 */
export function runtimeState(state, id) {
  const s = state.sessions.get(id);
  if (!s) return { usable: false, suspended: false, reason: 'This Session no longer exists.' };
  if (s.status === 'closed') return { usable: false, suspended: false, reason: 'This Session is closed. Reopen it to use its environment.' };
  if (state.transitions.has(id) || s.environment.owner) {
    const why = s.environment.owner ? ` (${s.environment.owner})` : '';
    return { usable: false, suspended: true, reason: `Suspended: the environment is changing${why}.` };
  }
  const own = waysHold(state, s);
  if (own) return { usable: false, suspended: true, ways: own, reason: waysHoldWords(own, id) };
  if (s.environment.state !== 'ready') {
    return { usable: false, suspended: false, reason: NOT_READY[s.environment.state] || `The environment is ${s.environment.state}, not ready.` };
  }
  return { usable: true, suspended: false, reason: '' };
}

/**
 * waysHold is the Ways set that owns a Session's Workspace ({session,
 * attempt_set_id}), or null: until it is kept or discarded, every primary
 * surface of the Workspace's Sessions is suspended, the composer too.
 */
export function waysHold(state, s) {
  return (s && state.ownerships.get(s.workspace_id)) || null;
}

/** waysHoldWords is the one line every suspended surface shows while a Ways set owns the Workspace. */
export function waysHoldWords(own, id) {
  const whose = own.session === id
    ? "this Session's Ways own the Workspace until you Keep one or Discard them"
    : 'parallel Ways of another Session own this Workspace';
  return `Suspended while Ways set ${own.attempt_set_id} decides: ${whose}.`;
}

/** Why the runtime tools are unavailable, per environment state. */
const NOT_READY = {
  unprepared: 'The environment is not prepared yet; rebuild it from the environment review.',
  awaiting_approval: 'The environment waits for your decision on its setup command (environment review).',
  preparing: 'The environment is being prepared…',
  failed: 'The environment failed; the evidence is in the environment review.',
};

/** stateLabel is the words shown for an environment state. */
export function stateLabel(st) {
  switch (st) {
    case 'unprepared': return 'Unprepared';
    case 'awaiting_approval': return 'Awaiting approval';
    case 'preparing': return 'Preparing';
    case 'ready': return 'Ready';
    case 'failed': return 'Failed';
    default: return st || 'Unknown';
  }
}

/**
 * sessionBadge is the badge of a Session: {state, label}, "changing" while
 * owned. With conn (the live connection's status) other than live or
 * hydrating, the environment is not known: it may have changed meanwhile.
 */
export function sessionBadge(state, s, conn = 'live') {
  if (conn === 'offline') return { state: 'unknown', label: 'unknown (offline)' };
  if (s.status === 'closed') return { state: 'closed', label: 'Closed' };
  if (state.transitions.has(s.id) || s.environment.owner) {
    const st = s.environment.state === 'preparing' ? 'preparing' : 'changing';
    return { state: st, label: st === 'preparing' ? 'Preparing' : 'Changing' };
  }
  return { state: s.environment.state, label: stateLabel(s.environment.state) };
}

/**
 * worktreeBranch is the branch of a Session isolated in its own worktree
 * (isolation "worktree", branch "lathe/<session_id>"), or '' for a Session
 * sharing its Workspace's checkout.
 */
export function worktreeBranch(s) {
  return s.isolation === 'worktree' ? s.branch || `lathe/${s.id}` : '';
}

/** sessionsOf returns a Workspace's Sessions: open ones, then closed, each by creation. */
export function sessionsOf(state, workspaceId) {
  const open = [];
  const closed = [];
  for (const s of state.sessions.values()) {
    if (s.workspace_id !== workspaceId) continue;
    (s.status === 'closed' ? closed : open).push(s);
  }
  const byCreation = (a, b) => (a.created_at < b.created_at ? -1 : a.created_at > b.created_at ? 1 : 0);
  return { open: open.sort(byCreation), closed: closed.sort(byCreation) };
}

/** workspaceList returns the Workspaces by name. */
export function workspaceList(state) {
  return [...state.workspaces.values()].sort((a, b) => a.name.localeCompare(b.name) || a.id.localeCompare(b.id));
}

// ---------------------------------------------------------------------------
// Turns

/** turnLog returns (creating) the turn log of a Session. */
export function turnLog(state, sessionId) {
  let log = state.turns.get(sessionId);
  if (!log) {
    log = { turns: [], loaded: false, error: '' };
    state.turns.set(sessionId, log);
  }
  return log;
}

/**
 * A client turn: the user's side (display_input, context), then `parts`, the
 * Agent's side in the order it happened: {kind:'reasoning'|'text', agent,
 * text} and {kind:'tool', tool}. `tools` are the tool calls by arrival, each
 * keyed by Agent, call ID and occurrence (the turn scopes run and turn).
 */
function newTurn(turnId) {
  return {
    turn_id: turnId, display_input: '', context: [], attachments: [], status: 'running', parts: [], tools: [],
    tokens: null, error: '', notice: '', command: null, model: '',
    target: '', // the Worker a lattice Session's turn addressed (target_agent)
    lattice: null, // a lattice turn's plan (latticerules.js)
    ran: null, // what ran the turn once it started: {agent, model, name, version} (ranOf)
    plan: null, // an outside agent's latest plan: [{content, status, priority}]
    rev: 0, // bumped on every change, so a view can skip unchanged turns
  };
}

function ensureTurn(state, sessionId, turnId) {
  const log = turnLog(state, sessionId);
  let t = log.turns.find((x) => x.turn_id === turnId);
  if (!t) {
    t = newTurn(turnId);
    log.turns.push(t);
  }
  state.turnSession.set(turnId, sessionId);
  return t;
}

/**
 * ranOf is what ran a turn or lane, from a session-start or lane-started
 * frame, a turn record or a snapshot run: its Agent, its model and, for an
 * outside agent, the name and version the agent reported of itself.
 */
export function ranOf(src) {
  return { agent: src.agent || '', model: src.model || '', name: src.agent_name || '', version: src.agent_version || '' };
}

/**
 * ranLine says what ran a turn or lane in a few words: "Claude Code 0.23.1 ·
 * claude-sonnet-4-6", the Agent named as the workbench names it
 * (agentName) with the version its agent reported; the built-in loop's is
 * its Agent and model. '' when nothing is known.
 */
export function ranLine(ran, agentName = (id) => id) {
  if (!ran) return '';
  const who = [ran.agent ? agentName(ran.agent) : ran.name, ran.version].filter(Boolean).join(' ');
  return [who, ran.model].filter(Boolean).join(' · ');
}

/** PLAN_STATUS marks a plan entry's status, with its words beside it. */
export const PLAN_STATUS = { pending: ['○', 'to do'], in_progress: ['◐', 'in progress'], completed: ['✓', 'done'] };

/** planEntries copies an outside agent's plan, each status one the workbench knows. */
export function planEntries(entries) {
  return (entries || []).map((e) => ({
    content: String(e.content ?? ''), status: PLAN_STATUS[e.status] ? e.status : 'pending', priority: e.priority || '',
  }));
}

/** turnText is the Agent's answer text of a turn, every text part joined. */
export function turnText(t) {
  return t.parts.filter((p) => p.kind === 'text').map((p) => p.text).join('');
}

/** appendDelta adds a streamed delta to the turn's last part of that kind and Agent, or starts one. */
function appendDelta(t, kind, agent, delta) {
  if (!delta) return;
  const last = t.parts.at(-1);
  if (last && last.kind === kind && last.agent === agent) last.text += delta;
  else t.parts.push({ kind, agent, text: delta });
}

const toolKey = (c) => `${c.agent || ''}|${c.call_id}|${c.occurrence ?? 0}`;

/** toolOf maps a durable or snapshot tool call onto the client's card shape. */
function toolOf(c) {
  return {
    key: toolKey(c), call_id: c.call_id, occurrence: c.occurrence ?? 0, name: c.name, agent: c.agent || '',
    arguments: c.arguments ?? '', result: c.result ?? '', is_error: !!c.is_error,
    phase: c.finished ? 'result' : 'start',
  };
}

/**
 * beginTurn records a turn this client is sending, with its `session`
 * command: until session-accepted it is resent after every reconnect (the
 * daemon accepts one turn identity once, and reattaches a repeat).
 */
export function beginTurn(state, sessionId, command) {
  const t = ensureTurn(state, sessionId, command.turn_id);
  t.status = 'sending';
  t.rev++;
  t.display_input = command.display_input ?? command.input;
  t.context = command.context_references || [];
  t.attachments = command.reference_ids || [];
  t.model = command.model_override || '';
  t.target = command.target_agent || '';
  t.command = command;
  return t;
}

/** unsentCommands are the `session` commands still waiting for session-accepted. */
export function unsentCommands(state) {
  const out = [];
  for (const log of state.turns.values()) {
    for (const t of log.turns) if (t.status === 'sending' && t.command) out.push(t.command);
  }
  return out;
}

/** activeTurn is the Session's running turn, if any. */
export function activeTurn(state, sessionId) {
  const log = state.turns.get(sessionId);
  return log ? log.turns.findLast((t) => LIVE.has(t.status)) || null : null;
}

/**
 * normaliseTurn maps a durable turn record (GET /turns, projections.Turn)
 * onto the client's turn: each step's reasoning, text and tool calls in
 * order, the tool calls paired with their results by Agent, call ID and
 * occurrence.
 */
export function normaliseTurn(r) {
  const t = newTurn(r.turn_id);
  t.display_input = r.display_input ?? r.input ?? '';
  t.context = r.context_references || [];
  t.attachments = r.reference_ids || [];
  t.model = r.model_override || '';
  t.target = r.target_agent || '';
  t.lattice = r.lattice ? planOf(r.lattice) : null;
  if (r.model || r.agent_name) t.ran = ranOf({ agent: r.agent_id, ...r });
  t.plan = r.plan ? planEntries(r.plan) : null;
  t.tools = (r.tool_calls || []).map(toolOf);
  const byKey = new Map(t.tools.map((c) => [c.key, c]));
  const placed = new Set();
  for (const s of r.steps || []) {
    if (s.reasoning) t.parts.push({ kind: 'reasoning', agent: s.agent, text: s.reasoning });
    if (s.text) t.parts.push({ kind: 'text', agent: s.agent, text: s.text });
    for (const sc of s.tool_calls || []) {
      const key = toolKey({ agent: s.agent, ...sc });
      let c = byKey.get(key);
      if (!c) { // announced by the model but never started
        c = toolOf({ agent: s.agent, ...sc });
        byKey.set(key, c);
        t.tools.push(c);
      }
      if (!placed.has(key)) t.parts.push({ kind: 'tool', tool: c });
      placed.add(key);
    }
  }
  for (const c of t.tools) if (!placed.has(c.key)) t.parts.push({ kind: 'tool', tool: c });
  if (!t.parts.some((p) => p.kind === 'text') && r.output) t.parts.push({ kind: 'text', agent: r.agent_id || '', text: r.output });
  t.status = r.status || 'done';
  t.error = r.error || '';
  if (r.budget && !t.error.includes(r.budget)) t.error += ` (budget ${r.budget})`;
  if (r.interrupted && !t.error) t.notice = 'The daemon stopped while this turn ran.';
  if (r.refused) t.notice = 'A hook refused this prompt: no model saw it, and none will.';
  if (r.stop_reason) t.notice = stopNotice(r.stop_reason);
  if (r.usage) t.tokens = tokensOf(r.usage);
  t.changed = r.changes_known ? r.changed_paths || [] : null; // the files the turn changed, when known
  return t;
}

/** stopNotice is the line a turn a hook ended shows: "Stopped by hook `x`: why". */
export function stopNotice(reason) {
  return reason ? reason[0].toUpperCase() + reason.slice(1) : '';
}

/**
 * loadTurns replaces a Session's durable turns with the route's answer. A
 * turn still streaming here keeps its live parts (the record only has whole
 * steps); a turn that ended here keeps its ending if the record has not
 * caught up yet. Turns this client is still sending stay at the end.
 */
export function loadTurns(state, sessionId, records) {
  const log = turnLog(state, sessionId);
  const prev = new Map(log.turns.map((t) => [t.turn_id, t]));
  const out = [];
  const seen = new Set();
  for (const r of records) {
    const t = normaliseTurn(r);
    const old = prev.get(t.turn_id);
    seen.add(t.turn_id);
    state.turnSession.set(t.turn_id, sessionId);
    if (old && LIVE.has(t.status) && old.status !== 'stale' && old.status !== 'sending') {
      // The record is behind this client's live view: keep the view, with the record's user side.
      old.display_input ||= t.display_input;
      if (!old.context.length) old.context = t.context;
      if (!old.attachments.length) old.attachments = t.attachments;
      old.rev++;
      out.push(old);
    } else {
      out.push(t);
    }
  }
  // A turn the record does not have yet (it was read before the accept
  // committed) stays, live parts and all: sending, accepted or already
  // running here, or refused.
  for (const t of log.turns) {
    if (!seen.has(t.turn_id) && (LIVE.has(t.status) || t.status === 'failed')) out.push(t);
  }
  log.turns = out;
  log.loaded = true;
  log.error = '';
}

/**
 * tokensOf reads usage: a terminal frame's top-level counts or a record's
 * `usage`. cost is null when the source carries no price (frames do not).
 */
export function tokensOf(f) {
  const input = f.input_tokens || 0;
  const output = f.output_tokens || 0;
  const reasoning = f.reasoning_tokens || 0;
  return {
    input, output, reasoning,
    total: f.total_tokens ?? input + output, // reasoning is inside output
    known: f.token_usage_known !== false,
    cost: typeof f.cost_usd === 'number' ? f.cost_usd : null,
    costKnown: f.cost_known !== false,
  };
}

/** sessionTokens sums the usage of a Session's turns. */
export function sessionTokens(state, sessionId) {
  const log = state.turns.get(sessionId);
  const sum = { input: 0, output: 0, reasoning: 0, total: 0, known: true, cost: null, costKnown: true, any: false };
  if (!log) return sum;
  for (const t of log.turns) {
    if (!t.tokens || (!t.tokens.known && t.tokens.total === 0)) continue;
    sum.any = true;
    sum.input += t.tokens.input;
    sum.output += t.tokens.output;
    sum.reasoning += t.tokens.reasoning;
    sum.total += t.tokens.total;
    sum.known &&= t.tokens.known;
    if (t.tokens.cost === null) sum.costKnown = false;
    else sum.cost = (sum.cost || 0) + t.tokens.cost;
    sum.costKnown &&= t.tokens.costKnown;
  }
  return sum;
}

/** formatTokens renders a count: "1,234 tokens", or "at least 1,234 tokens" for a subtotal. */
export function formatTokens(tok) {
  return `${tok.known ? '' : 'at least '}${tok.total.toLocaleString('en-US')} tokens`;
}

/**
 * formatCost renders a price: "$0.0012"; "at least $0.0012" for a priced
 * subtotal; "cost unknown" when no part had a known price (never "at
 * least $0"); '' when the source says nothing about price (a live frame,
 * before the durable record adds it).
 */
export function formatCost(tok) {
  if (tok.cost === null) return '';
  if (!tok.costKnown && !(tok.cost > 0)) return 'cost unknown';
  const n = tok.cost === 0 ? '0' : tok.cost >= 1 ? tok.cost.toFixed(2) : tok.cost.toPrecision(2);
  return `${tok.costKnown ? '' : 'at least '}$${n}`;
}

/**
 * usageLine is a turn's or Session's usage in words ("1,234 tokens ·
 * $0.01"), or '' when there is nothing honest to say: a turn stopped
 * before any usage came back is not "at least 0 tokens".
 */
export function usageLine(tok) {
  if (!tok || (!tok.known && tok.total === 0)) return '';
  const cost = formatCost(tok);
  return cost ? `${formatTokens(tok)} · ${cost}` : formatTokens(tok);
}

function sessionOfFrame(state, f) {
  if (f.session) return f.session;
  if (f.turn_id && state.turnSession.has(f.turn_id)) return state.turnSession.get(f.turn_id);
  if (f.workflow && state.sessions.has(f.workflow)) return f.workflow;
  return null;
}

/**
 * applyTurnFrame applies one Session turn frame. It returns the Session ID it
 * touched, or null for a frame of no known Session.
 */
export function applyTurnFrame(state, f) {
  const sessionId = sessionOfFrame(state, f);
  if (!sessionId) return null;
  const log = turnLog(state, sessionId);
  const turnId = f.turn_id || (activeTurn(state, sessionId) || {}).turn_id;
  if (!turnId) return sessionId;
  if (f.kind === 'session-stop-rejected') {
    const t = log.turns.find((x) => x.turn_id === turnId);
    if (t) {
      t.notice = `Stop was refused: ${f.error}`;
      t.rev++;
    }
    return sessionId;
  }
  if (f.kind === 'session-error' && f.rejected && !log.turns.some((x) => x.turn_id === turnId)) return sessionId;
  const t = ensureTurn(state, sessionId, turnId);
  t.rev++;
  switch (f.kind) {
    case 'session-accepted':
      if (t.status === 'sending' || t.status === 'stale') t.status = 'accepted';
      // Another tab's turn: its message comes with the frame (the sender knows it already).
      if (!t.display_input && typeof f.display_input === 'string') t.display_input = f.display_input;
      break;
    case 'session-start':
      if (LIVE.has(t.status)) t.status = 'running';
      if (f.model || f.agent_name) t.ran = ranOf(f);
      break;
    case 'turn-plan':
      t.plan = planEntries(f.entries);
      break;
    case 'token':
    case 'reasoning':
      // Adjacent deltas may arrive merged in one frame: appending is the same.
      appendDelta(t, f.kind === 'token' ? 'text' : 'reasoning', f.agent || '', f.delta);
      break;
    case 'tool-call': {
      const key = toolKey(f);
      let c = t.tools.find((x) => x.key === key);
      if (!c) {
        c = toolOf(f);
        t.tools.push(c);
        t.parts.push({ kind: 'tool', tool: c });
      }
      if (f.phase === 'result') {
        c.phase = 'result';
        c.result = f.result ?? '';
        c.is_error = !!f.is_error;
      } else if (f.arguments !== undefined && f.arguments !== null) {
        c.arguments = f.arguments;
      }
      break;
    }
    case 'coordinator-plan':
      t.lattice = planOf(f);
      break;
    case 'session-done':
      t.status = 'done';
      t.tokens = tokensOf(f);
      t.notice = '';
      break;
    case 'session-cancelled':
      t.status = 'cancelled';
      t.tokens = tokensOf(f);
      t.notice = stopNotice(f.stop_reason);
      break;
    case 'session-error':
      t.status = t.status === 'sending' && f.rejected ? 'failed' : 'error';
      t.error = f.error || 'the turn failed';
      if (f.budget && !t.error.includes(f.budget)) t.error += ` (budget ${f.budget})`;
      t.tokens = tokensOf(f);
      t.notice = '';
      break;
  }
  return sessionId;
}

/**
 * applyLatticeEvent applies a Worker lifecycle `event` frame to its turn's
 * plan. It returns the Session ID, or null for a turn this client does not
 * show.
 */
export function applyLatticeEvent(state, f) {
  const sessionId = sessionOfFrame(state, f);
  const t = sessionId && state.turns.get(sessionId)?.turns.find((x) => x.turn_id === f.turn_id);
  if (!t || !t.lattice) return null;
  if (applyLifecycle(t.lattice, f)) t.rev++;
  return sessionId;
}

/**
 * failSending marks the oldest turn still waiting for session-accepted as
 * failed with message: the daemon answered the `session` command with an
 * `error` frame instead. It returns the Session ID, or null.
 */
export function failSending(state, message) {
  for (const [sessionId, log] of state.turns) {
    const t = log.turns.find((x) => x.status === 'sending');
    if (t) {
      t.status = 'failed';
      t.error = message;
      t.rev++;
      return sessionId;
    }
  }
  return null;
}

/**
 * renderInput is the execution input of a turn: the composer text, then each
 * context reference as a fenced block naming its file and lines.
 */
export function renderInput(text, refs) {
  let out = text;
  for (const r of refs) {
    if (isPreviewRef(r)) {
      out += `\n\n${previewInput(r)}`;
      continue;
    }
    if (isReviewRef(r)) {
      out += `\n\n${reviewInput(r)}`;
      continue;
    }
    const lines = r.start_line === r.end_line ? `line ${r.start_line}` : `lines ${r.start_line}-${r.end_line}`;
    const fence = r.text.includes('```') ? '````' : '```';
    out += `\n\nContext from ${r.path} (${lines}):\n${fence}\n${r.text}\n${fence}`;
  }
  return out;
}

// ---------------------------------------------------------------------------
// The connection in words

/** CLOSE_WORDS are WebSocket close codes a user may see, in words. */
const CLOSE_WORDS = {
  1000: 'the daemon closed the connection',
  1001: 'the daemon is going away (restarting?)',
  1006: 'the connection dropped',
  1008: 'the daemon refused the connection',
  1011: 'the daemon hit an error',
  1012: 'the daemon is restarting',
  1013: 'the daemon is busy',
};

/**
 * connWords says what an offline connection is doing and why, in words:
 * {text: 'Reconnecting…', why}. A bare close code ("closed (1006)")
 * becomes its meaning; an unknown one, "the connection closed".
 */
export function connWords(c) {
  const r = String(c.reason || '').trim();
  const m = /^closed \((\d+)\)$/.exec(r) || /^(\d{4})$/.exec(r);
  let why;
  if (m) why = CLOSE_WORDS[Number(m[1])] || 'the connection closed';
  else if (r === 'stopped') why = 'disconnected';
  else why = r || 'disconnected';
  return { text: 'Reconnecting…', why };
}
