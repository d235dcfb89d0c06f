import { request, type Dispatcher } from 'undici';
import type { Principal } from '../auth/principal.js';
import type { EnvelopeFields } from '../crypto/index.js';
import { DomainError, NotFoundError } from '../errors.js';
import type { Store } from '../store/index.js';
import type { Envelope } from '../wire/mailbox.js';
import type { AlmanacService } from './almanac.js';
import type { MailboxService } from './mailbox.js';
import type { ProxyService } from './proxy.js';

export interface CourierPolicy {
  /** How long a message may take to reach an agent's endpoint elsewhere. */
  timeoutMs: number;
}

/**
 * Carries the envelopes Agentry signs itself (a chat identity's messages, an external A2A
 * agent's replies) to their targets, by the road a uAgents sender takes.
 */
export class Courier {
  constructor(
    private readonly store: Store,
    private readonly almanac: AlmanacService,
    private readonly mailbox: MailboxService,
    private readonly proxy: ProxyService,
    private readonly dispatcher: Dispatcher,
    private readonly policy: CourierPolicy,
  ) {}

  /**
   * Delivers the envelope as a uAgents sender would: to each endpoint the agent registered in
   * the Almanac, in turn, until one takes it (this service's own mailbox and proxy endpoints
   * are delivered to in-process, so the trace and the timeline show the message); to its
   * mailbox or proxy here when it registered no endpoint. Answers why it failed, or undefined.
   */
  async deliver(agent: string, envelope: EnvelopeFields): Promise<string | undefined> {
    let endpoints: string[] = [];
    try {
      endpoints = (await this.almanac.resolve(agent)).endpoints.map((e) => e.url);
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
    const anonymous: Principal = { kind: 'anonymous' };
    const wire = envelope as Envelope;
    if (endpoints.length === 0) {
      const listing = await this.store.repos.agents.findForwarding(agent);
      if (!listing) return 'The agent has no mailbox or proxy here and no endpoint in the Almanac';
      endpoints = [
        listing.url ? this.almanac.ownEndpoint('proxy') : this.almanac.ownEndpoint('mailbox'),
      ];
    }
    const failures: string[] = [];
    for (const url of endpoints) {
      try {
        switch (this.almanac.ownEndpointKind(url)) {
          case 'mailbox':
            await this.mailbox.submit(wire, anonymous);
            return undefined;
          case 'proxy': {
            let keptBecause: string | undefined;
            await this.proxy.forward(wire, anonymous, undefined, (reason) => {
              keptBecause = reason;
            });
            return keptBecause === undefined
              ? undefined
              : `Not delivered yet: ${keptBecause}; kept, and forwarded again until the agent takes it or it expires`;
          }
          default:
            await this.post(url, envelope);
            return undefined;
        }
      } catch (err) {
        failures.push(err instanceof DomainError ? err.message : describe(err));
      }
    }
    return failures.length === 1
      ? `Not delivered: ${failures[0]}`
      : `Not delivered to any of its ${failures.length} endpoints: ${failures.join('; ')}`;
  }

  private async post(url: string, envelope: EnvelopeFields): Promise<void> {
    const response = await request(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(envelope),
      dispatcher: this.dispatcher,
      signal: AbortSignal.timeout(this.policy.timeoutMs),
    });
    await response.body.dump();
    if (response.statusCode < 200 || response.statusCode >= 300) {
      throw new Error(`the agent's endpoint answered with status ${response.statusCode}`);
    }
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    if (err.name === 'TimeoutError') return 'the agent’s endpoint did not answer in time';
    return cause instanceof Error ? `${err.message} (${cause.message})` : err.message;
  }
  return String(err);
}
