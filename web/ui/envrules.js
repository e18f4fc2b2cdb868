// The environment panel's pure rules: which setup output it shows, bounded
// to its end. Pure: no DOM, no network (web/uitest drives it).

/** SETUP_OUTPUT_MAX bounds the setup output the panel renders, in characters (its end is kept). */
export const SETUP_OUTPUT_MAX = 16 * 1024;

/**
 * setupOutput is the setup output the panel shows for env: {text, cut}
 * with at most max characters from its end (cut says some were left out),
 * or null when there is none, or when a failure's evidence already shows
 * the same output.
 */
export function setupOutput(env, max = SETUP_OUTPUT_MAX) {
  const out = env?.setup_output || '';
  if (!out) return null;
  if (env.state === 'failed' && env.evidence?.output_tail === out) return null;
  if (out.length <= max) return { text: out, cut: false };
  return { text: out.slice(out.length - max), cut: true };
}

/**
 * reasonWords says why the environment was last prepared, in the user's
 * words rather than the daemon's reason codes: an approval of the setup
 * command is a new plan to the daemon, and to the user it is their approval.
 */
export function reasonWords(env) {
  switch (env?.reason) {
    case 'prepared after create':
      return 'prepared when the Session was created';
    case 'reopened':
      return 'prepared again when the Session was reopened';
    case 'rebuilt: plan changed':
      return env.setup_command && env.setup_approved ? 'prepared after you approved its setup command' : 'prepared again after its plan changed';
    case 'rebuilt: rebuild requested':
      return 'rebuilt because you asked for it';
    case 'reconstructed after a daemon restart':
      return 'rebuilt after the daemon restarted';
    default:
      return env?.reason || '';
  }
}
