import { createHash } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import { envelopeDigest, type EnvelopeFields } from '../crypto/index.js';
import { NotFoundError, QuotaExceededError } from '../errors.js';
import type { Store } from '../store/index.js';
import type { MailboxRow, MailboxWithOwnerUsage } from '../store/repositories/mailboxes.js';
import type { PendingMessage } from '../store/repositories/messages.js';
import type { Clock } from './clock.js';
import { UNKNOWN_TARGET, type Envelope, type EnvelopeAdmission } from './envelopes.js';
import { agentAddressOr422 } from './identity.js';
import { usagePeriod, type UsageService } from './usage.js';
import { formatUuid4, uuidOr422 } from './uuids.js';

export interface MailboxPolicy {
  retentionMs: number;
  /** Messages one sweep transaction deletes; bounds how long it holds the writer. */
  sweepBatchSize: number;
  /** Batches one sweep run deletes at most; the next run goes on. */
  sweepMaxBatches: number;
}

export interface MailboxPage {
  limit: number;
  offset: number;
}

const ENTRY_NOT_FOUND = 'Unable to lookup mailbox entry';
const MAILBOX_NOT_FOUND = 'Agent mailbox not found';

/**
 * The uuid a stored envelope is known by: sha256 over the signed digest and the fields it
 * leaves out (and `expires`/`nonce` again, which the signing bytes pack without a marker of
 * which one is present), shaped as a version-4 UUID because uAgents insists on one. The
 * same submission always maps to the same uuid, which is what makes submit idempotent.
 */
export function messageUuid(envelope: EnvelopeFields): string {
  const unsigned = JSON.stringify([
    envelope.version,
    envelope.protocol_digest ?? null,
    envelope.expires ?? null,
    envelope.nonce ?? null,
    envelope.signature ?? null,
  ]);
  return formatUuid4(
    createHash('sha256').update(envelopeDigest(envelope)).update(unsigned).digest(),
  );
}

/**
 * Store-and-forward delivery: anyone may submit a signed envelope for a registered agent,
 * which then lists, reads and deletes (acknowledges) what waits for it. A 200 on submit means
 * the message is committed; counters and usage move in the same transaction as the message.
 */
export class MailboxService {
  constructor(
    private readonly store: Store,
    private readonly admission: EnvelopeAdmission,
    private readonly usage: UsageService,
    private readonly clock: Clock,
    private readonly policy: MailboxPolicy,
  ) {}

  async submit(envelope: Envelope, principal: Principal): Promise<void> {
    const address = await this.admission.admit(envelope, principal);
    const text = JSON.stringify(envelope);
    const size = Buffer.byteLength(text);
    const uuid = messageUuid(envelope);
    const now = this.clock.now();
    const retained = now + this.policy.retentionMs;
    const expiresAt =
      envelope.expires == null ? retained : Math.min(retained, envelope.expires * 1000);
    const period = usagePeriod(now);
    await this.store.transaction(async (tx) => {
      const found = await tx.mailboxes.findWithOwnerUsage(address, period);
      if (!found) throw new NotFoundError(UNKNOWN_TARGET);
      this.checkDeliveryQuotas(found, size);
      const owner = found.mailbox.user_id;
      const stored = await tx.messages.insert({
        uuid,
        address,
        envelope: text,
        size,
        received_at: now,
        expires_at: expiresAt,
      });
      if (stored) {
        await tx.mailboxes.count(address, 1, size);
        await tx.usage.add(owner, period, { num_messages: 1 });
      }
    });
  }

  private checkDeliveryQuotas(found: MailboxWithOwnerUsage, size: number): void {
    const limits = this.usage.limitsWith(found.overrides);
    const { num_messages: messages } = found.counters;
    if (messages + 1 > limits.messagesPerMonth) {
      throw new QuotaExceededError(
        `Message quota reached ${messages} / ${limits.messagesPerMonth}`,
      );
    }
    const stored = found.ownerBytesStored;
    if (stored + size > limits.bytesStored) {
      throw new QuotaExceededError(`Storage quota reached ${stored} / ${limits.bytesStored}`);
    }
  }

  /** Unexpired messages, oldest first; their bytes count as transferred. */
  async list(
    principal: Principal,
    rawAddress: string,
    page: MailboxPage,
  ): Promise<PendingMessage[]> {
    return this.served(principal, rawAddress, MAILBOX_NOT_FOUND, (address, now) =>
      this.store.repos.messages.listPending(address, now, page),
    );
  }

  async get(principal: Principal, rawAddress: string, rawUuid: string): Promise<PendingMessage> {
    const uuid = uuidOr422(rawUuid, ['path', 'uuid']);
    const [message] = await this.served(
      principal,
      rawAddress,
      ENTRY_NOT_FOUND,
      async (address, now) => {
        const found = await this.store.repos.messages.findPending(address, uuid, now);
        return found ? [found] : [];
      },
    );
    if (!message) throw new NotFoundError(ENTRY_NOT_FOUND);
    return message;
  }

  /** Acknowledges a message: it is gone once this resolves. */
  async delete(principal: Principal, rawAddress: string, rawUuid: string): Promise<void> {
    const uuid = uuidOr422(rawUuid, ['path', 'uuid']);
    const address = agentAddressOr422(rawAddress, ['path', 'address']);
    const mailbox = await this.store.repos.mailboxes.find(address);
    if (!mailbox || !mayRead(principal, mailbox)) throw new NotFoundError(ENTRY_NOT_FOUND);
    await this.store.transaction(async (tx) => {
      const removed = await tx.messages.delete(address, uuid);
      if (!removed) throw new NotFoundError(ENTRY_NOT_FOUND);
      await tx.mailboxes.count(address, -1, -removed.size);
    });
  }

  /** Whether the agent has a mailbox to deliver to (the readiness probe). */
  async isReady(rawAddress: string): Promise<boolean> {
    const address = rawAddress.toLowerCase();
    return (await this.store.repos.mailboxes.find(address)) !== undefined;
  }

  /**
   * Deletes expired messages in bounded batches, each its own short transaction so that
   * submissions are not held up; returns how many went.
   */
  async sweepExpired(): Promise<number> {
    let swept = 0;
    for (let batch = 0; batch < this.policy.sweepMaxBatches; batch++) {
      const removed = await this.store.transaction(async (tx) => {
        const rows = await tx.messages.deleteExpired(this.clock.now(), this.policy.sweepBatchSize);
        const perMailbox = new Map<string, { messages: number; bytes: number }>();
        for (const row of rows) {
          const total = perMailbox.get(row.address) ?? { messages: 0, bytes: 0 };
          total.messages += 1;
          total.bytes += row.size;
          perMailbox.set(row.address, total);
        }
        for (const [address, total] of perMailbox) {
          await tx.mailboxes.count(address, -total.messages, -total.bytes);
        }
        return rows.length;
      });
      swept += removed;
      if (removed < this.policy.sweepBatchSize) break;
    }
    return swept;
  }

  /**
   * Reads messages of the mailbox at `rawAddress` for a caller who may read it, unless the
   * owner's transfer quota is spent, and adds the bytes served to this period's usage.
   */
  private async served(
    principal: Principal,
    rawAddress: string,
    notFound: string,
    read: (address: string, now: number) => Promise<PendingMessage[]>,
  ): Promise<PendingMessage[]> {
    const address = agentAddressOr422(rawAddress, ['path', 'address']);
    const now = this.clock.now();
    const period = usagePeriod(now);
    const repos = this.store.repos;
    const found = await repos.mailboxes.findWithOwnerUsage(address, period);
    if (!found || !mayRead(principal, found.mailbox)) throw new NotFoundError(notFound);
    const limit = this.usage.limitsWith(found.overrides).bytesTransferredPerMonth;
    const transferred = found.counters.bytes_transferred;
    if (transferred >= limit) {
      throw new QuotaExceededError(`Transfer quota reached ${transferred} / ${limit}`);
    }
    const messages = await read(address, now);
    const bytes = messages.reduce((sum, message) => sum + message.size, 0);
    const owner = found.mailbox.user_id;
    if (bytes > 0) await repos.usage.add(owner, period, { bytes_transferred: bytes });
    return messages;
  }
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
