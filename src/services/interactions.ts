import { NotFoundError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../store/index.js';
import type { Interaction } from '../wire/interactions.js';
import type { DeliveryTrace } from './deliveries.js';

/** Interactions agents report with another, recorded for its owner's statistics. */
export class InteractionsService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly trace: DeliveryTrace,
  ) {}

  /** The auth plugin has already matched the caller's attestation to `source`. */
  async record({ source, target, session_id }: Interaction): Promise<void> {
    // Only registered agents have an owner to keep statistics for.
    if (!(await this.store.repos.agents.isRegistered(source))) {
      throw new NotFoundError('No registered agent found matching interaction source');
    }
    await this.store.repos.interactions.insert({
      source,
      target,
      session_id,
      created_at: this.clock.now(),
    });
    await this.trace.interaction(source, target, session_id);
  }
}
