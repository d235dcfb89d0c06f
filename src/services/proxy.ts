import { request, type Dispatcher } from 'undici';
import type { Principal } from '../auth/principal.js';
import { BadGatewayError, BadRequestError, GatewayTimeoutError, NotFoundError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import { PrivateTargetError } from '../infra/outbound.js';
import type { Store } from '../store/index.js';
import type { ClaimedForward } from '../store/repositories/mailbox.js';
import type { Endpoint } from '../wire/common.js';
import type { Envelope } from '../wire/mailbox.js';
import type { DeliveryTrace } from './deliveries.js';
import { UNKNOWN_TARGET, type EnvelopeAdmission } from './envelopes.js';
import { messageUuid, type MailboxService } from './mailbox.js';
import type { ForwardOutages } from './proxy-outages.js';
import type { ClaimedProbe } from '../store/repositories/proxy.js';

export interface ProxyPolicy {
  timeoutMs: number;
  /** A synchronous exchange waits for the target's reply envelope. */
  syncTimeoutMs: number;
  /** The largest reply relayed back to a synchronous sender. */
  replyLimitBytes: number;
  /** Most kept messages one process forwards at once. */
  forwardBatchSize: number;
  /** Where senders reach the agents it forwards to: its own submit URL. */
  submitUrl: string;
}

/** What the target answered to a synchronous exchange, relayed as is. */
export interface RelayedReply {
  contentType: string;
  body: Buffer;
}

/**
 * Why a delivery failed: `error` is what the sender hears, `detail` what the owner's trace
 * keeps, and `transient` whether a later attempt may succeed (the target down, slow, failing
 * or refused as private, which its owner or the operator may change), so that the message is
 * worth keeping.
 */
interface DeliveryFailure {
  error: Error;
  detail: string;
  transient: boolean;
}

/** How one POST to an agent's URL went: its answer (2xx), or why not. */
type Delivery =
  | { ok: true; response: Dispatcher.ResponseData }
  | { ok: false; statusCode: number | null; failure: DeliveryFailure };

const PRIVATE_TARGET_HINT =
  'set AGENTRY_ALLOW_PRIVATE_TARGETS=true (or start with --allow-private-targets) to allow local networks';

/**
 * How long past an attempt's timeout a claim on a kept message lasts: time to record the
 * outcome. A process that dies during an attempt leaves the message due again after it.
 */
const LEASE_MARGIN_MS = 30_000;

/**
 * Forwards signed envelopes to the URL their target registered, after the same admission
 * checks as the mailbox; the target's answer decides the sender's. An asynchronous envelope
 * that could not be forwarded for a reason that may pass (the target down, slow, failing, or
 * its address refused as private) is kept in the target's mailbox, unless its owner turned
 * that off, and forwarded again in the background ({@link forwardDue}) until it is delivered,
 * polled by its agent, or expires (docs/mailbox.md, "Kept forwards"). Such a failure begins an
 * outage of the target ({@link ForwardOutages}): until a forward goes through, the target is
 * tried once per back-off step, and the asynchronous messages that arrive for it meanwhile are
 * kept without an attempt of their own; once it answers, the messages waiting for it go
 * together.
 */
export class ProxyService {
  constructor(
    private readonly store: Store,
    private readonly admission: EnvelopeAdmission,
    private readonly mailbox: MailboxService,
    private readonly dispatcher: Dispatcher,
    private readonly clock: Clock,
    private readonly policy: ProxyPolicy,
    private readonly trace: DeliveryTrace,
    private readonly outages: ForwardOutages,
  ) {}

  /**
   * Delivers the envelope; resolves to the target's reply for a synchronous exchange
   * (`connection` is the sender's `x-uagents-connection` header) and undefined otherwise,
   * also when the envelope was kept for a later forward (`kept` is then told why).
   */
  async forward(
    envelope: Envelope,
    principal: Principal,
    connection: string | undefined,
    kept?: (reason: string) => void,
  ): Promise<RelayedReply | undefined> {
    const admitted = await this.admission.admit(envelope, principal);
    const { target: address, envelope: fields, digest } = admitted;
    const forwarding = await this.store.repos.agents.findForwarding(address);
    if (!forwarding?.url) {
      // A registered agent without a URL still has an owner to tell.
      await this.trace.refused(envelope, UNKNOWN_TARGET);
      throw new NotFoundError(UNKNOWN_TARGET);
    }
    const sync = connection === 'sync';
    if (!sync && forwarding.keep && forwarding.failing) {
      // The target is in an outage: the forwarder's next attempt tries it, with this message
      // among those waiting.
      await this.mailbox.keep(admitted, this.clock.now());
      // Counted in the outage (unless it ended meanwhile: the message is then due at once).
      await this.outages.held(address);
      kept?.('its agent could not be reached');
      return undefined;
    }
    const body = JSON.stringify(fields);
    const started = performance.now();
    const attempt = (statusCode: number | null, error: string | null): Promise<void> =>
      this.trace.forwarded({
        address,
        sender: fields.sender,
        uuid: messageUuid(fields, digest),
        digest: this.trace.digestOf(digest),
        size: Buffer.byteLength(body),
        statusCode,
        latencyMs: performance.now() - started,
        error,
      });
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (connection !== undefined) headers['x-uagents-connection'] = connection;

    const delivery = await this.post(
      forwarding.url,
      body,
      headers,
      sync ? this.policy.syncTimeoutMs : this.policy.timeoutMs,
    );
    if (!delivery.ok) {
      const { failure } = delivery;
      await attempt(delivery.statusCode, failure.detail);
      if (failure.transient) await this.outages.failed(address, failure.detail);
      else if (forwarding.failing) await this.outages.answered(address);
      // A synchronous sender waits for a reply that a later forward could not bring it.
      if (!sync && failure.transient && forwarding.keep) {
        // Due now: the outage's back-off decides when it is tried.
        await this.mailbox.keep(admitted, this.clock.now());
        kept?.(failure.detail);
        return undefined;
      }
      throw failure.error;
    }
    if (forwarding.failing) await this.outages.answered(address);
    const { response } = delivery;
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

  /**
   * One round of the background forwarder: claims the kept messages due now (no other
   * process forwards them meanwhile) and forwards each again, all at once. Of an agent in an
   * outage, only the oldest is tried, once its back-off step is due (its probe); the others
   * wait for it. A delivered one leaves the mailbox as if its agent had deleted it and ends
   * the outage, after which the messages waiting go together; one that fails again waits for
   * the outage's next step; one its agent refuses (a 4xx), or whose agent no longer has a
   * URL, is not forwarded again and waits for its agent to poll it or expires. Resolves once
   * every attempt is recorded, to true when more may be due now (it claimed as many as it may
   * at once, or an outage ended).
   */
  async forwardDue(): Promise<boolean> {
    const now = this.clock.now();
    const lease = now + this.policy.timeoutMs + LEASE_MARGIN_MS;
    const { mailbox, proxy } = this.store.repos;
    const probes = await proxy.claimProbes(now, lease, this.policy.forwardBatchSize);
    const claimed = await mailbox.claimForwards(now, lease, this.policy.forwardBatchSize);
    const outcomes = await Promise.allSettled([
      ...probes.map((probe) => this.probe(probe)),
      ...claimed.map((message) => this.forwardAgain(message)),
    ]);
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    if (failed) throw failed.reason;
    const ended = outcomes.some((outcome) => outcome.status === 'fulfilled' && outcome.value);
    return ended || claimed.length === this.policy.forwardBatchSize;
  }

  /**
   * Where a sender reaches a proxy agent (`GET /v1/proxy/resolve/{agent_address}`): this
   * proxy, for an agent with a URL to forward to; 404 for any other. The URL itself is its
   * owner's to know.
   */
  async resolve(address: string): Promise<Endpoint> {
    if (!(await this.isReady(address))) {
      throw new NotFoundError(`Agent ${address} has no URL for this proxy to forward to`);
    }
    return { url: this.policy.submitUrl, weight: 1 };
  }

  /** Whether the agent has a URL to forward to (the readiness probe). */
  async isReady(address: string): Promise<boolean> {
    return Boolean((await this.store.repos.agents.findForwarding(address))?.url);
  }

  /**
   * Forwards a kept message of an agent that was not in an outage when it was claimed: a
   * failure begins one (or adds to one begun meanwhile), an answer ends one begun meanwhile;
   * whether one ended.
   */
  private async forwardAgain(message: ClaimedForward): Promise<boolean> {
    const outcome = await this.forwardKept(message);
    if (outcome.ok === 'failed') {
      await this.outages.failed(message.address, outcome.error);
      return false;
    }
    return outcome.ok === 'answered' && this.outages.answered(message.address);
  }

  /** Tries an agent in an outage with its oldest waiting message; whether the outage ended. */
  private async probe(probe: ClaimedProbe): Promise<boolean> {
    if (!probe.message) {
      await this.outages.release(probe);
      return false;
    }
    const outcome = await this.forwardKept(probe.message);
    if (outcome.ok === 'failed') {
      await this.outages.attemptFailed(probe, outcome.error);
      return false;
    }
    if (outcome.ok === 'answered') return this.outages.answered(probe.address);
    await this.outages.release(probe);
    return false;
  }

  /**
   * Forwards a kept message again: `answered` when its agent answered (delivered, or refused
   * it), `failed` when it could not be reached, `skipped` when it has no URL any more.
   */
  private async forwardKept(
    message: ClaimedForward,
  ): Promise<{ ok: 'answered' | 'skipped' } | { ok: 'failed'; error: string }> {
    const { mailbox } = this.store.repos;
    if (message.url === null) {
      await mailbox.stopForwarding([message.uuid], message.lease);
      return { ok: 'skipped' };
    }
    const started = performance.now();
    const delivery = await this.post(
      message.url,
      message.envelope,
      { 'content-type': 'application/json' },
      this.policy.timeoutMs,
    );
    if (delivery.ok) await delivery.response.body.dump();
    await this.trace.forwarded({
      address: message.address,
      sender: message.sender,
      uuid: message.uuid,
      digest: message.digest,
      size: Number(message.size),
      statusCode: delivery.ok ? delivery.response.statusCode : delivery.statusCode,
      latencyMs: performance.now() - started,
      error: delivery.ok ? null : delivery.failure.detail,
      kept: true,
    });
    const now = this.clock.now();
    if (delivery.ok) {
      const tracedAt = this.trace.enabled ? now : undefined;
      await mailbox.acknowledge(message.address, message.uuid, tracedAt, 'delivered');
      return { ok: 'answered' };
    }
    if (!delivery.failure.transient) {
      await mailbox.stopForwarding([message.uuid], message.lease);
      return { ok: 'answered' };
    }
    // Due again at once: its agent's outage decides when it is tried.
    await mailbox.forwardAgainAt(message.uuid, message.lease, now);
    return { ok: 'failed', error: delivery.failure.detail };
  }

  /** POSTs `body` to the agent's URL, following no redirect; a 2xx answer is its caller's. */
  private async post(
    url: string,
    body: string,
    headers: Record<string, string>,
    timeoutMs: number,
  ): Promise<Delivery> {
    let response: Dispatcher.ResponseData;
    try {
      response = await request(url, {
        method: 'POST',
        headers,
        body,
        dispatcher: this.dispatcher,
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      return { ok: false, statusCode: null, failure: deliveryFailure(err) };
    }
    const { statusCode } = response;
    if (statusCode >= 200 && statusCode < 300) return { ok: true, response };
    await response.body.dump();
    const error = new BadGatewayError(`Target agent answered with status ${statusCode}`);
    // A 4xx other than 429 is the agent refusing this message, and a redirect is not followed:
    // neither changes by trying again.
    const transient = statusCode >= 500 || statusCode === 429;
    return { ok: false, statusCode, failure: { error, detail: error.message, transient } };
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
 * Why a delivery failed (see {@link DeliveryFailure}). The sender may be anyone, so the
 * target's internals stay out of `error`: where the owner's URL resolved to is theirs alone.
 */
function deliveryFailure(err: unknown): DeliveryFailure {
  if (err instanceof BadGatewayError) return { error: err, detail: err.message, transient: false };
  const told = (error: Error) => ({ error, detail: error.message, transient: true });
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
      transient: true,
    };
  }
  if (causes.some((e) => e instanceof Error && e.name === 'TimeoutError')) {
    return told(new GatewayTimeoutError('Target agent did not answer in time'));
  }
  const code = causes.map((e) => (e as { code?: unknown }).code).find((c) => typeof c === 'string');
  return told(new BadGatewayError(`Target agent is unreachable${code ? ` (${code})` : ''}`));
}
