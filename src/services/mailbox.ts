import { createHash } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import { envelopeDigest, type EnvelopeFields } from '../crypto/index.js';
import { NotFoundError, QuotaExceededError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import { GroupCommit, type ItemOutcome } from '../infra/group-commit.js';
import { formatUuid4 } from '../infra/uuids.js';
import type { Store } from '../store/index.js';
import type { MailboxRow, NewMessage, PendingMessage } from '../store/repositories/mailbox.js';
import type { Envelope, MailboxPage } from '../wire/mailbox.js';
import { UNKNOWN_TARGET, type EnvelopeAdmission } from './envelopes.js';
import { usagePeriod, type UsageService } from './usage.js';

export interface MailboxPolicy {
  retentionMs: number;
  /** Messages one sweep transaction deletes; bounds how long it holds the writer. */
  sweepBatchSize: number;
  /** Batches one sweep run deletes at most; the next run goes on. */
  sweepMaxBatches: number;
  /** Most submitted messages committed in one transaction (see {@link GroupCommit}). */
  maxDeliveryGroup: number;
}

/** A checked envelope on its way into a mailbox. */
interface Delivery {
  address: string;
  uuid: string;
  /** The envelope's JSON text, as stored and served. */
  text: string;
  size: number;
  /** The envelope's own expiry, unix seconds. */
  expires: number | null;
}

/** Where an owner's quotas stand while a group of deliveries is written. */
interface OwnerTally {
  limits: { messagesPerMonth: number; bytesStored: number };
  messagesThisPeriod: number;
  bytesStored: number;
}

const ENTRY_NOT_FOUND = 'Unable to lookup mailbox entry';
const MAILBOX_NOT_FOUND = 'Agent mailbox not found';

/**
 * The uuid a stored envelope is known by: sha256 over the signed digest and the fields it
 * leaves out (and `expires`/`nonce` again, which the signing bytes pack without a marker of
 * which one is present), shaped as a version-4 UUID because uAgents insists on one. The
 * same submission always maps to the same uuid, which is what makes submit idempotent.
 * `digest` is the envelope's `envelopeDigest`, when verification has computed it already.
 */
export function messageUuid(
  envelope: EnvelopeFields,
  digest: Uint8Array = envelopeDigest(envelope),
): string {
  const unsigned = JSON.stringify([
    envelope.version,
    envelope.protocol_digest ?? null,
    envelope.expires ?? null,
    envelope.nonce ?? null,
    envelope.signature ?? null,
  ]);
  return formatUuid4(createHash('sha256').update(digest).update(unsigned).digest());
}

/**
 * Store-and-forward delivery: anyone may submit a signed envelope for a registered agent,
 * which then lists, reads and deletes (acknowledges) what waits for it. A 200 on submit means
 * the message is committed; counters and usage move in the same transaction as the message.
 */
export class MailboxService {
  private readonly deliveries: GroupCommit<Delivery, void>;

  constructor(
    private readonly store: Store,
    private readonly admission: EnvelopeAdmission,
    private readonly usage: UsageService,
    private readonly clock: Clock,
    private readonly policy: MailboxPolicy,
  ) {
    this.deliveries = new GroupCommit((group) => this.deliverGroup(group), policy.maxDeliveryGroup);
  }

  /** Resolves once the message is committed (or was already stored). */
  async submit(envelope: Envelope, principal: Principal): Promise<void> {
    const { target, digest } = await this.admission.admit(envelope, principal);
    const text = JSON.stringify(envelope);
    await this.deliveries.submit({
      address: target,
      uuid: messageUuid(envelope, digest),
      text,
      size: Buffer.byteLength(text),
      expires: envelope.expires ?? null,
    });
  }

  /**
   * Writes a group of deliveries, in arrival order, each checked against its owner's quotas
   * as read just before the group and moved by the deliveries before it in the group. Groups
   * are written one at a time, so a process never counts past a quota; replicas writing at
   * the same moment may each let one group through on the same reading. A message stored
   * already (a client resending after a lost answer) is not stored or counted again. The
   * messages, their mailboxes' counters and their owners' usage and stored bytes are written
   * atomically.
   */
  private async deliverGroup(group: Delivery[]): Promise<ItemOutcome<void>[]> {
    const now = this.clock.now();
    const period = usagePeriod(now);
    const retained = now + this.policy.retentionMs;
    const { mailbox } = this.store.repos;
    const addresses = [...new Set(group.map((delivery) => delivery.address))];
    // Independent reads: on PostgreSQL they go out together on separate connections.
    const [mailboxes, taken] = await Promise.all([
      mailbox.findManyWithOwnerUsage(addresses, period),
      mailbox.existing(group.map((delivery) => delivery.uuid)),
    ]);
    const owners = new Map<string, OwnerTally>();
    const accepted: NewMessage[] = [];
    const outcomes = group.map((delivery): ItemOutcome<void> => {
      const found = mailboxes.get(delivery.address);
      if (!found) return { ok: false, error: new NotFoundError(UNKNOWN_TARGET) };
      if (taken.has(delivery.uuid)) return { ok: true, value: undefined };
      const owner = found.mailbox.user_id;
      let tally = owners.get(owner);
      if (!tally) {
        tally = {
          limits: this.usage.limitsWith(found.overrides),
          messagesThisPeriod: found.counters.num_messages,
          bytesStored: found.ownerBytesStored,
        };
        owners.set(owner, tally);
      }
      const refusal = quotaRefusal(tally, delivery.size);
      if (refusal) return { ok: false, error: refusal };
      tally.messagesThisPeriod += 1;
      tally.bytesStored += delivery.size;
      taken.add(delivery.uuid);
      accepted.push({
        uuid: delivery.uuid,
        address: delivery.address,
        envelope: delivery.text,
        size: delivery.size,
        received_at: now,
        expires_at:
          delivery.expires == null ? retained : Math.min(retained, delivery.expires * 1000),
      });
      return { ok: true, value: undefined };
    });
    // A uuid another writer stored meanwhile is skipped: that message is stored, as asked.
    if (accepted.length > 0) await mailbox.deliver(accepted, period);
    return outcomes;
  }

  /** Unexpired messages, oldest first; their bytes count as transferred. */
  async list(principal: Principal, address: string, page: MailboxPage): Promise<PendingMessage[]> {
    return this.served(principal, address, MAILBOX_NOT_FOUND, (now) =>
      this.store.repos.mailbox.listPending(address, now, page),
    );
  }

  async get(principal: Principal, address: string, uuid: string): Promise<PendingMessage> {
    const [message] = await this.served(principal, address, ENTRY_NOT_FOUND, async (now) => {
      const found = await this.store.repos.mailbox.findPending(address, uuid, now);
      return found ? [found] : [];
    });
    if (!message) throw new NotFoundError(ENTRY_NOT_FOUND);
    return message;
  }

  /** Acknowledges a message: it is gone once this resolves. */
  async delete(principal: Principal, address: string, uuid: string): Promise<void> {
    const { mailbox } = this.store.repos;
    const found = await mailbox.find(address);
    if (!found || !mayRead(principal, found)) throw new NotFoundError(ENTRY_NOT_FOUND);
    if (!(await mailbox.acknowledge(address, uuid))) throw new NotFoundError(ENTRY_NOT_FOUND);
  }

  /** Whether the agent has a mailbox to deliver to (the readiness probe). */
  async isReady(address: string): Promise<boolean> {
    return (await this.store.repos.mailbox.find(address)) !== undefined;
  }

  /**
   * Deletes expired messages in bounded batches, each its own short transaction so that
   * submissions are not held up; returns how many went.
   */
  async sweepExpired(): Promise<number> {
    let swept = 0;
    for (let batch = 0; batch < this.policy.sweepMaxBatches; batch++) {
      const removed = await this.store.repos.mailbox.sweep(
        this.clock.now(),
        this.policy.sweepBatchSize,
      );
      swept += removed;
      if (removed < this.policy.sweepBatchSize) break;
    }
    return swept;
  }

  /**
   * Reads messages of the mailbox at `address` for a caller who may read it, unless the
   * owner's transfer quota is spent, and adds the bytes served to this period's usage.
   */
  private async served(
    principal: Principal,
    address: string,
    notFound: string,
    read: (now: number) => Promise<PendingMessage[]>,
  ): Promise<PendingMessage[]> {
    const now = this.clock.now();
    const period = usagePeriod(now);
    const { mailbox } = this.store.repos;
    // Neither read waits for the other (on PostgreSQL they go out on two connections); the
    // messages are returned only once the caller and the quota have been checked.
    const [found, messages] = await Promise.all([
      mailbox.findWithOwnerUsage(address, period),
      read(now),
    ]);
    if (!found || !mayRead(principal, found.mailbox)) throw new NotFoundError(notFound);
    const limit = this.usage.limitsWith(found.overrides).bytesTransferredPerMonth;
    const transferred = found.counters.bytes_transferred;
    if (transferred >= limit) {
      throw new QuotaExceededError(`Transfer quota reached ${transferred} / ${limit}`);
    }
    const bytes = messages.reduce((sum, message) => sum + message.size, 0);
    const owner = found.mailbox.user_id;
    if (bytes > 0) await mailbox.countTransfer(owner, period, bytes);
    return messages;
  }
}

/** The quota a delivery of `size` bytes would break, as the error its sender gets. */
function quotaRefusal(tally: OwnerTally, size: number): QuotaExceededError | undefined {
  const { messagesPerMonth, bytesStored } = tally.limits;
  if (tally.messagesThisPeriod + 1 > messagesPerMonth) {
    return new QuotaExceededError(
      `Message quota reached ${tally.messagesThisPeriod} / ${messagesPerMonth}`,
    );
  }
  if (tally.bytesStored + size > bytesStored) {
    return new QuotaExceededError(`Storage quota reached ${tally.bytesStored} / ${bytesStored}`);
  }
  return undefined;
}

/**
 * A mailbox is read by its agent (the auth plugin has matched the attestation to the path's
 * address) or its owner. Another user's mailbox is reported as missing, not forbidden, so
 * that its existence is not revealed.
 */
function mayRead(principal: Principal, mailbox: MailboxRow): boolean {
  return principal.kind === 'agent'
    ? principal.address === mailbox.address
    : principal.kind === 'user' && principal.userId === mailbox.user_id;
}
