import { bodyChecker } from './check.js';
import { excessiveDepthAt } from './json-depth.js';
import { Envelope } from './mailbox.js';

/**
 * Deeper than this, a stored envelope is not served. Its own fields are flat; the bound only
 * matters for fields stored before submit dropped unknown ones, and sits far below the depth
 * at which Python's JSON parser gives up (about 1,000 levels).
 */
const MAX_STORED_DEPTH = 32;

const checkEnvelope = bodyChecker(Envelope);

/**
 * Why the uAgents client could not take this stored envelope text from the mailbox at
 * `address` (it would abandon its page, or skip the message without ever deleting it), or
 * undefined when it can: the same rules as submit, the nesting bound, and a target that is
 * the mailbox's own address as spelled.
 */
export function unservableReason(text: string, address: string): string | undefined {
  if (excessiveDepthAt(text, MAX_STORED_DEPTH) !== -1) {
    return `nests deeper than ${MAX_STORED_DEPTH} levels`;
  }
  let envelope: unknown;
  try {
    envelope = JSON.parse(text);
  } catch {
    return 'not JSON text';
  }
  const issues = checkEnvelope(envelope);
  if (issues.length > 0) {
    return issues
      .map((issue) => `${issue.loc.slice(1).join('.') || 'envelope'}: ${issue.msg}`)
      .join('; ');
  }
  if ((envelope as { target: string }).target !== address) {
    return 'target is not the mailbox’s address as the agent spells it';
  }
  return undefined;
}
