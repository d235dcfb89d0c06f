import { request, type Dispatcher } from 'undici';
import type { Principal } from '../auth/principal.js';
import { BadGatewayError, BadRequestError, GatewayTimeoutError, NotFoundError } from '../errors.js';
import { PrivateTargetError } from '../infra/outbound.js';
import type { Store } from '../store/index.js';
import type { Envelope } from '../wire/mailbox.js';
import type { DeliveryTrace } from './deliveries.js';
import { UNKNOWN_TARGET, type EnvelopeAdmission } from './envelopes.js';
import { messageUuid } from './mailbox.js';

export interface ProxyPolicy {
  timeoutMs: number;
  /** A synchronous exchange waits for the target's reply envelope. */
  syncTimeoutMs: number;
  /** The largest reply relayed back to a synchronous sender. */
  replyLimitBytes: number;
}

/** What the target answered to a synchronous exchange, relayed as is. */
export interface RelayedReply {
  contentType: string;
  body: Buffer;
}

const PRIVATE_TARGET_HINT =
  'set AGENTRY_ALLOW_PRIVATE_TARGETS=true (or start with --allow-private-targets) to allow local networks';

/**
 * Forwards signed envelopes to the URL their target registered, after the same admission
 * checks as the mailbox. Nothing is stored: the target's answer decides the sender's.
 */
export class ProxyService {
  constructor(
    private readonly store: Store,
    private readonly admission: EnvelopeAdmission,
    private readonly dispatcher: Dispatcher,
    private readonly policy: ProxyPolicy,
    private readonly trace: DeliveryTrace,
  ) {}

  /**
   * Delivers the envelope; resolves to the target's reply for a synchronous exchange
   * (`connection` is the sender's `x-uagents-connection` header) and undefined otherwise.
   */
  async forward(
    envelope: Envelope,
    principal: Principal,
    connection: string | undefined,
  ): Promise<RelayedReply | undefined> {
    const {
      target: address,
      envelope: admitted,
      digest,
    } = await this.admission.admit(envelope, principal);
    const url = (await this.store.repos.agents.findForwarding(address))?.url;
    if (!url) {
      // A registered agent without a URL still has an owner to tell.
      await this.trace.refused(envelope, UNKNOWN_TARGET);
      throw new NotFoundError(UNKNOWN_TARGET);
    }
    const body = JSON.stringify(admitted);
    const started = performance.now();
    const attempt = (statusCode: number | null, error: string | null): Promise<void> =>
      this.trace.forwarded({
        envelope: admitted,
        uuid: messageUuid(admitted, digest),
        digest,
        size: Buffer.byteLength(body),
        statusCode,
        latencyMs: performance.now() - started,
        error,
      });
    const sync = connection === 'sync';
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (connection !== undefined) headers['x-uagents-connection'] = connection;

    let response: Dispatcher.ResponseData;
    try {
      response = await request(url, {
        method: 'POST',
        headers,
        body,
        dispatcher: this.dispatcher,
        signal: AbortSignal.timeout(sync ? this.policy.syncTimeoutMs : this.policy.timeoutMs),
      });
    } catch (err) {
      const failure = deliveryFailure(err);
      await attempt(null, failure.detail);
      throw failure.error;
    }
    if (response.statusCode < 200 || response.statusCode >= 300) {
      await response.body.dump();
      const refused = new BadGatewayError(
        `Target agent answered with status ${response.statusCode}`,
      );
      await attempt(response.statusCode, refused.message);
      throw refused;
    }
    if (!sync) {
      await response.body.dump();
      await attempt(response.statusCode, null);
      return undefined;
    }
    let reply: Buffer;
    try {
      reply = await this.readReply(response);
    } catch (err) {
      await attempt(response.statusCode, err instanceof Error ? err.message : String(err));
      throw err;
    }
    await attempt(response.statusCode, null);
    const contentType = response.headers['content-type'];
    return {
      contentType: typeof contentType === 'string' ? contentType : 'application/json',
      body: reply,
    };
  }

  /** Whether the agent has a URL to forward to (the readiness probe). */
  async isReady(address: string): Promise<boolean> {
    return Boolean((await this.store.repos.agents.findForwarding(address))?.url);
  }

  private async readReply(response: Dispatcher.ResponseData): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let length = 0;
    try {
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        length += chunk.length;
        if (length > this.policy.replyLimitBytes) {
          response.body.destroy();
          throw new BadGatewayError(
            `Target agent's reply is larger than ${this.policy.replyLimitBytes} bytes`,
          );
        }
        chunks.push(chunk);
      }
    } catch (err) {
      throw deliveryFailure(err).error;
    }
    return Buffer.concat(chunks);
  }
}

/**
 * Why a delivery failed: `error` is what the sender hears, `detail` what the owner's trace
 * keeps. The sender may be anyone, so the target's internals stay out of `error`: where the
 * owner's URL resolved to is theirs alone.
 */
function deliveryFailure(err: unknown): { error: Error; detail: string } {
  const told = (error: Error) => ({ error, detail: error.message });
  if (err instanceof BadGatewayError) return told(err);
  const causes: unknown[] = [];
  for (let e: unknown = err; e instanceof Error && causes.length < 5; e = e.cause) causes.push(e);
  const refused = causes.find((e) => e instanceof PrivateTargetError);
  if (refused instanceof PrivateTargetError) {
    const error = new BadRequestError(
      `Target agent's URL points at a private network address; ${PRIVATE_TARGET_HINT}`,
    );
    return {
      error,
      detail: `private address refused: ${refused.host} resolves to ${refused.address}; ${PRIVATE_TARGET_HINT}`,
    };
  }
  if (causes.some((e) => e instanceof Error && e.name === 'TimeoutError')) {
    return told(new GatewayTimeoutError('Target agent did not answer in time'));
  }
  const code = causes.map((e) => (e as { code?: unknown }).code).find((c) => typeof c === 'string');
  return told(new BadGatewayError(`Target agent is unreachable${code ? ` (${code})` : ''}`));
}
