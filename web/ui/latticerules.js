// The rules of a lattice turn's plan as the workbench shows it: no DOM, no
// network (web/uitest/lattice.test.mjs drives them). A plan comes from a
// coordinator-plan frame, a snapshot run's plan fields or a turn record's
// `lattice`; the Worker lifecycle `event` frames (typed events, keyed by
// turn_id and task) move its subtasks' states.

/** LIFECYCLE are the Worker lifecycle event types. */
export const LIFECYCLE = new Set(['AgentActivated', 'TaskCompleted', 'AgentFailed', 'AgentCancelled', 'AgentPanicked']);

/** Subtask states in words. */
export const STATE_WORDS = {
  pending: 'waiting',
  activated: 'running',
  completed: 'completed',
  failed: 'failed',
  skipped: 'skipped',
  cancelled: 'cancelled',
  panicked: 'failed unexpectedly',
  interrupted: 'interrupted',
};

/**
 * planOf copies a plan from a frame, snapshot run or record: {coordinator,
 * goal, subtasks: [{id, title, instruction, needs_tools, depends_on,
 * worker, status, output, error, tokens}]}.
 */
export function planOf(src) {
  return {
    coordinator: src.coordinator || '',
    goal: src.goal || '',
    subtasks: (src.subtasks || []).map((s) => ({
      id: s.id, title: s.title || s.id, instruction: s.instruction || '',
      needs_tools: s.needs_tools || [], depends_on: s.depends_on || [], worker: s.worker || '',
      status: s.status || 'pending', output: textOf(s.output), error: s.error || '',
      tokens: s.tokens ? (s.tokens.input_tokens || 0) + (s.tokens.output_tokens || 0) : null,
    })),
  };
}

/** textOf reads a record's text: a string, or a stored reference's preview. */
function textOf(v) {
  if (typeof v === 'string') return v;
  if (v && v.$blob) return v.$blob.preview || '';
  return '';
}

/**
 * applyLifecycle moves a subtask by its Worker lifecycle event; it reports
 * whether the plan changed. A skipped subtask is an AgentFailed named
 * "skipped".
 */
export function applyLifecycle(plan, f) {
  const st = plan.subtasks.find((s) => s.id === f.task);
  if (!st) return false;
  switch (f.type) {
    case 'AgentActivated':
      st.status = 'activated';
      break;
    case 'TaskCompleted':
      st.status = 'completed';
      st.output = f.output || '';
      break;
    case 'AgentFailed':
      st.status = f.name === 'skipped' ? 'skipped' : 'failed';
      st.error = f.output || '';
      break;
    case 'AgentCancelled':
      st.status = 'cancelled';
      break;
    case 'AgentPanicked':
      st.status = 'panicked';
      st.error = f.output || '';
      break;
    default:
      return false;
  }
  if (typeof f.tokens === 'number') st.tokens = f.tokens;
  return true;
}

/**
 * workers lists the plan's Workers in the order they first appear, each
 * with its state: running while one of its subtasks runs; else failed,
 * cancelled or interrupted when one of them ended so; else completed when
 * all completed; else waiting.
 */
export function workers(plan) {
  const byWorker = new Map();
  for (const st of plan.subtasks) {
    if (!byWorker.has(st.worker)) byWorker.set(st.worker, []);
    byWorker.get(st.worker).push(st);
  }
  const out = [];
  for (const [worker, subtasks] of byWorker) {
    const has = (...states) => subtasks.some((s) => states.includes(s.status));
    let state = 'waiting';
    if (has('activated')) state = 'running';
    else if (has('failed', 'panicked')) state = 'failed';
    else if (has('cancelled')) state = 'cancelled';
    else if (has('interrupted')) state = 'interrupted';
    else if (subtasks.every((s) => s.status === 'completed')) state = 'completed';
    else if (has('skipped') && !has('pending')) state = 'skipped';
    out.push({ worker, state, subtasks });
  }
  return out;
}

/**
 * levels orders the plan as a tree of rounds: level 0 holds the subtasks
 * that wait for nothing, level n those whose longest chain of dependencies
 * is n long. Each subtask keeps its plan order within its level.
 */
export function levels(plan) {
  const ids = new Map(plan.subtasks.map((s) => [s.id, s]));
  const depth = new Map();
  const depthOf = (id, seen = new Set()) => {
    if (depth.has(id)) return depth.get(id);
    if (seen.has(id)) return 0; // a cycle never reaches a plan; stay finite anyway
    seen.add(id);
    const st = ids.get(id);
    let d = 0;
    for (const dep of st?.depends_on || []) if (ids.has(dep)) d = Math.max(d, depthOf(dep, seen) + 1);
    depth.set(id, d);
    return d;
  };
  const out = [];
  for (const st of plan.subtasks) {
    const d = depthOf(st.id);
    while (out.length <= d) out.push([]);
    out[d].push(st);
  }
  return out;
}

/**
 * teamOf is a lattice Session's Workers: the configured team narrowed by
 * the Session's mode.workers.
 */
export function teamOf(team, session) {
  const all = team?.workers || [];
  const narrow = session?.mode?.workers;
  return narrow && narrow.length ? all.filter((w) => narrow.includes(w)) : all;
}

/**
 * targetOf is the target_agent a lattice Session's next turn is sent with:
 * the picked Worker; without a pick the whole team, or, when no
 * coordinator is configured to plan for it, the first Worker.
 */
export function targetOf(picked, team, session) {
  if (session?.mode?.kind !== 'lattice') return '';
  if (picked) return picked;
  return team?.coordinator ? '' : teamOf(team, session)[0] || '';
}
