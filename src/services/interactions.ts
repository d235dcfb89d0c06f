import { canonicalUuid, CryptoFormatError } from '../crypto/index.js';
import { NotFoundError, RequestValidationError } from '../errors.js';
import type { Store } from '../store/index.js';
import type { Clock } from './clock.js';
import { agentAddressOr422 } from './identity.js';

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
    let session: string;
    try {
      session = canonicalUuid(report.session_id);
    } catch (err) {
      if (!(err instanceof CryptoFormatError)) throw err;
      throw RequestValidationError.single(
        ['body', 'session_id'],
        'Input should be a valid UUID, unable to parse string as a UUID',
        'uuid_parsing',
      );
    }
    // Only registered agents have an owner to keep statistics for.
    if (!(await this.store.repos.agentDirectory.isRegistered(source))) {
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
