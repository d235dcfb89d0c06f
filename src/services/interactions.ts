import { NotFoundError } from '../errors.js';
import type { Store } from '../store/index.js';
import type { Clock } from './clock.js';
import { agentAddressOr422 } from './identity.js';
import { uuidOr422 } from './uuids.js';

export interface InteractionReport {
  source: string;
  target: string;
  session_id: string;
}

/** Interactions an agent reports with another, recorded for its owner's statistics. */
export class InteractionsService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
  ) {}

  /** The auth plugin has already matched the caller's attestation to `source`. */
  async record(report: InteractionReport): Promise<void> {
    const source = agentAddressOr422(report.source, ['body', 'source']);
    const target = agentAddressOr422(report.target, ['body', 'target']);
    const session = uuidOr422(report.session_id, ['body', 'session_id']);
    // Only registered agents have an owner to keep statistics for.
    if (!(await this.store.repos.agents.isRegistered(source))) {
      throw new NotFoundError('No registered agent found matching interaction source');
    }
    await this.store.repos.interactions.insert({
      source,
      target,
      session_id: session,
      created_at: this.clock.now(),
    });
  }
}
