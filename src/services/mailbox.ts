import { createHash } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import { envelopeDigest, type EnvelopeFields } from '../crypto/index.js';
import { DomainError, NotFoundError, QuotaExceededError } from '../errors.js';
import type { ChangeFeed } from '../infra/change-feed.js';
import type { Clock } from '../infra/clock.js';
import { Waiter, type Departure, type HeldPolls, type WakeReason } from '../infra/held-polls.js';
import { inBatches } from '../infra/batches.js';
import { GroupCommit, type ItemOutcome } from '../infra/group-commit.js';
import { formatUuid4 } from '../infra/uuids.js';
import type { Store } from '../store/index.js';
import type { StoredMessage } from '../store/repositories/activity.js';
import type { NewDeliveryEvent } from '../store/repositories/deliveries.js';
import type { DeliveryTrace } from './deliveries.js';
import type {
  HandOut,
  MailboxRow,
  NewMessage,
  PendingMessage,
  QuarantinedMessage,
} from '../store/repositories/mailbox.js';
import type { Envelope, MailboxPage } from '../wire/mailbox.js';
import { UNKNOWN_TARGET, type AdmittedEnvelope, type EnvelopeAdmission } from './envelopes.js';
import { usageDay, usagePeriod, type UsageService } from './usage.js';

export interface MailboxPolicy {
  retentionMs: number;
  /** Messages one sweep transaction deletes; bounds how long it holds the writer. */
  sweepBatchSize: number;
  /** Batches one sweep run deletes at most; the next run goes on. */
  sweepMaxBatches: number;
  /** Most submitted messages committed in one transaction (see {@link GroupCommit}). */
  maxSubmissionGroup: number;
  /**
   * How long an agent's poll of its empty mailbox waits for a message before answering
   * (empty); 0 answers at once.
   */
  holdMs: number;
}

/**
 * Where held polls wait (`held`), and where the messages this process commits are told of
 * (`changes`: the held polls here and in the other processes, the live streams).
 */
export interface DeliveryWakeups {
  held: HeldPolls;
  changes: ChangeFeed;
}

/** Something in this service that receives envelopes for addresses of its own. */
export interface LocalRecipient {
  /** Takes the envelope and answers true, or answers false when its target is not its own. */
  receive(admitted: AdmittedEnvelope): Promise<boolean>;
}

/** A poll that may be held: `departure` is left when its client goes away. */
export interface PollOptions {
  hold: boolean;
  departure?: Departure;
  /** Whether the bytes answered count as transferred (not for a HEAD, which sends none). */
  charge?: boolean;
}

/** A checked envelope on its way into a mailbox. */
interface Submission {
  address: string;
  uuid: string;
  /** The envelope's JSON text, as stored and served. */
  text: string;
  size: number;
  /** The envelope's own expiry, unix seconds. */
  expires: number | null;
  sender: string;
  /** The envelope digest, when the trace is on (hex). */
  digest: string | null;
  /** When the proxy, which kept the message after a failed forward, forwards it again. */
  forwardAt: number | undefined;
}

/** Where an owner's quotas stand while a group of submissions is written. */
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
  /** Commits submitted messages in groups: one transaction (or statement) for many. */
  private readonly submissions: GroupCommit<Submission, void>;
  private readonly recipients: LocalRecipient[] = [];

  constructor(
    private readonly store: Store,
    private readonly admission: EnvelopeAdmission,
    private readonly usage: UsageService,
    private readonly clock: Clock,
    private readonly wakeups: DeliveryWakeups,
    private readonly policy: MailboxPolicy,
    private readonly trace: DeliveryTrace,
  ) {
    this.submissions = new GroupCommit(
      (group) => this.commitSubmissions(group),
      policy.maxSubmissionGroup,
    );
  }

  /** Resolves once the message is committed (or was already stored). */
  async submit(envelope: Envelope, principal: Principal): Promise<void> {
    const admitted = await this.admission.admit(envelope, principal);
    try {
      await this.storeAdmitted(admitted, undefined, false);
    } catch (err) {
      if (!(err instanceof NotFoundError) || err.message !== UNKNOWN_TARGET) throw err;
      // A target without a mailbox may be an address this service answers for itself; its
      // refusal, or none taking it, is traced (against a registered agent) as a refusal.
      const uuid = messageUuid(admitted.envelope, admitted.digest);
      try {
        for (const recipient of this.recipients) if (await recipient.receive(admitted)) return;
      } catch (refusal) {
        if (refusal instanceof DomainError) {
          await this.trace.refused(admitted.envelope, refusal.message, uuid);
        }
        throw refusal;
      }
      await this.trace.refused(admitted.envelope, err.message, uuid);
      throw err;
    }
  }

  /**
   * Adds addresses this service receives envelopes for itself (chat identities): an envelope
   * whose target has no mailbox is offered to them before it is refused.
   */
  receiveFor(recipient: LocalRecipient): void {
    this.recipients.push(recipient);
  }

  /**
   * Keeps an envelope the proxy could not forward: stored and counted as a submission, and
   * due to be forwarded again at `forwardAt`. Resolves once it is committed (or was stored or
   * delivered already); refused as a submission would be (a quota).
   */
  keep(admitted: AdmittedEnvelope, forwardAt: number): Promise<void> {
    return this.storeAdmitted(admitted, forwardAt);
  }

  /** `traceUnknown`: whether a target without a mailbox is traced here as a refusal. */
  private async storeAdmitted(
    admitted: AdmittedEnvelope,
    forwardAt: number | undefined,
    traceUnknown = true,
  ): Promise<void> {
    const text = JSON.stringify(admitted.envelope);
    const uuid = messageUuid(admitted.envelope, admitted.digest);
    try {
      await this.submissions.submit({
        address: admitted.target,
        uuid,
        text,
        size: Buffer.byteLength(text),
        expires: admitted.envelope.expires ?? null,
        sender: admitted.envelope.sender,
        digest: this.trace.digestOf(admitted.digest),
        forwardAt,
      });
    } catch (err) {
      // A target without a mailbox may still be a registered agent (a proxy one).
      if (err instanceof NotFoundError && (traceUnknown || err.message !== UNKNOWN_TARGET)) {
        await this.trace.refused(admitted.envelope, err.message, uuid);
      }
      throw err;
    }
  }

  /**
   * Writes a group of submissions, in arrival order, each checked against its owner's quotas
   * as read just before the group and moved by the submissions before it in the group. Groups
   * are written one at a time, so a process never counts past a quota; replicas writing at
   * the same moment may each let one group through on the same reading. A message stored
   * already (a client resending after a lost answer), or delivered and deleted within its
   * retention (a replay), is not stored or counted again. The
   * messages, their mailboxes' counters and their owners' usage and stored bytes are written
   * atomically.
   */
  private async commitSubmissions(group: Submission[]): Promise<ItemOutcome<void>[]> {
    const now = this.clock.now();
    const period = usagePeriod(now);
    const retained = now + this.policy.retentionMs;
    const { mailbox } = this.store.repos;
    const addresses = [...new Set(group.map((submission) => submission.address))];
    // Independent reads: on PostgreSQL they go out together on separate connections.
    const [mailboxes, taken] = await Promise.all([
      mailbox.findManyWithOwnerUsage(addresses, period),
      mailbox.existing(group.map((submission) => submission.uuid)),
    ]);
    // A group that holds a kept message writes the forward columns of every message in it.
    const keeping = group.some((submission) => submission.forwardAt !== undefined);
    const owners = new Map<string, OwnerTally>();
    const accepted: NewMessage[] = [];
    /** The owner of each accepted message's mailbox, by uuid. */
    const ownerOf = new Map<string, string>();
    const traced: NewDeliveryEvent[] = [];
    const trace = (
      submission: Submission,
      event: 'submitted' | 'refused',
      detail: string,
    ): void => {
      if (!this.trace.enabled) return;
      const { address, uuid, digest, sender, size } = submission;
      traced.push({ address, event, at: now, uuid, digest, sender, size, detail });
    };
    const outcomes = group.map((submission): ItemOutcome<void> => {
      const found = mailboxes.get(submission.address);
      if (!found) return { ok: false, error: new NotFoundError(UNKNOWN_TARGET) };
      if (taken.has(submission.uuid)) {
        // A resubmission (or a replay): traced, as it stores nothing to stand for it.
        trace(submission, 'submitted', 'already stored or delivered');
        return { ok: true, value: undefined };
      }
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
      const refusal = quotaRefusal(tally, submission.size);
      if (refusal) {
        trace(submission, 'refused', refusal.message);
        return { ok: false, error: refusal };
      }
      tally.messagesThisPeriod += 1;
      tally.bytesStored += submission.size;
      taken.add(submission.uuid);
      ownerOf.set(submission.uuid, owner);
      accepted.push({
        uuid: submission.uuid,
        address: submission.address,
        envelope: submission.text,
        size: submission.size,
        received_at: now,
        expires_at:
          submission.expires == null ? retained : Math.min(retained, submission.expires * 1000),
        // The pending message is the trace of its submission: who sent it, which envelope.
        ...(this.trace.enabled ? { sender: submission.sender, digest: submission.digest } : {}),
        // Kept by the proxy: its failed forward is the first attempt.
        ...(keeping && {
          next_forward_at: submission.forwardAt ?? null,
          forward_attempts: submission.forwardAt === undefined ? 0 : 1,
        }),
      });
      return { ok: true, value: undefined };
    });
    // A uuid another writer stored meanwhile is skipped: that message is stored, as asked.
    if (accepted.length > 0) {
      const { ids, traced: written } = await mailbox.deliver(accepted, usageDay(now), traced);
      const stored: StoredMessage[] = [];
      for (const message of accepted) {
        const id = ids.get(message.uuid);
        if (id === undefined) continue;
        const reading = { period, found: mailboxes.get(message.address)! };
        stored.push({ ...message, id, owner: ownerOf.get(message.uuid)!, reading });
      }
      // Handed on as they are: this process's streams show them without reading them back.
      void this.wakeups.changes.publish([
        {
          kind: 'message.stored',
          addresses: stored.map((message) => message.address),
          local: { messages: stored },
        },
      ]);
      // Refusals (the owner's webhooks hear of them) and resubmissions, as any trace row.
      this.trace.recorded(written);
    } else if (traced.length > 0) {
      // Nothing to store (resubmissions, refusals): the trace rows alone.
      await this.trace.record(traced);
    }
    return outcomes;
  }

  /**
   * Unexpired messages, oldest first; their bytes count as transferred unless
   * `options.charge` is false (a HEAD request, which sends none of them). A page that would
   * take the transfer quota past its limit is cut to the messages that fit (406 when not even
   * the first does). An agent's poll of the first page that finds its mailbox empty is held
   * (when `options.hold`): it answers as soon as a message for the agent is committed, in this
   * process or another on the same database, or empty after the hold limit. A mailbox removed
   * meanwhile answers as missing; a shutdown ({@link endHeldPolls}) or the client going away
   * ends it empty. Only what is finally answered counts as transferred.
   *
   * It answers through `done` (`err` null on success) rather than a promise: thousands of polls
   * may be held at once, and held, a poll is then one object waiting among the held polls, with no
   * promise or callback chain of its own.
   */
  poll(
    principal: Principal,
    address: string,
    page: MailboxPage,
    options: PollOptions,
    done: PollCallback,
  ): void {
    const charge = options.charge ?? true;
    // The agent's own poll (not its owner's look, a later page or a HEAD): presence follows it.
    const agentPoll = charge && principal.kind === 'agent' && page.offset === 0;
    if (agentPoll && options.hold && this.policy.holdMs > 0) {
      const started = this.clock.now();
      const deadline = performance.now() + this.policy.holdMs;
      this.trace.polling(address, started, started + this.policy.holdMs);
      const poll = new HeldPoll(this, this.wakeups.held, principal, address, page, charge, {
        deadline,
        departure: options.departure,
        started,
        done,
      });
      return poll.look();
    }
    if (agentPoll) {
      const now = this.clock.now();
      this.trace.polling(address, now, now);
    }
    answerWith(this.readPage(principal, address, page, charge), done);
  }

  /** A held poll of the agent's mailbox that began at `started` has ended (see {@link poll}). */
  pollEnded(address: string, started: number): void {
    this.trace.polling(address, started, this.clock.now());
  }

  /** One read of a mailbox page, never held (see {@link poll}). */
  readPage(
    principal: Principal,
    address: string,
    page: MailboxPage,
    charge: boolean,
  ): Promise<PendingMessage[]> {
    return this.served(principal, address, MAILBOX_NOT_FOUND, charge, (now) =>
      this.store.repos.mailbox.listPending(address, now, page),
    );
  }

  /**
   * As {@link readPage}, with `committed` (messages for the agent that this process has just
   * stored) in place of the read: a held poll woken by their commit answers them without
   * reading them back. Undefined when none of them is unexpired.
   */
  committedPage(
    principal: Principal,
    address: string,
    page: MailboxPage,
    charge: boolean,
    committed: readonly StoredMessage[],
  ): Promise<PendingMessage[]> | undefined {
    const now = this.clock.now();
    const pending: PendingMessage[] = [];
    for (const message of committed) {
      if (pending.length === page.limit) break;
      if (message.expires_at <= now) continue;
      pending.push({
        uuid: message.uuid,
        envelope: message.envelope,
        size: message.size,
        received_at: message.received_at,
        expires_at: message.expires_at,
        polled_at: null,
        next_forward_at: message.next_forward_at ?? null,
      });
    }
    if (pending.length === 0) return undefined;
    return this.served(
      principal,
      address,
      MAILBOX_NOT_FOUND,
      charge,
      () => Promise.resolve(pending),
      committed[0]!.reading,
    );
  }

  /** Polls held now, in this process. */
  get heldPolls(): number {
    return this.wakeups.held.held;
  }

  /** Whether held polls were ended (the process is stopping or draining). */
  get holdsEnded(): boolean {
    return this.wakeups.held.closed;
  }

  /**
   * Ends every held poll (each answers an empty list) and answers later polls at once: for
   * shutdown and draining.
   */
  endHeldPolls(): void {
    this.wakeups.held.close();
  }

  /** Ends up to `count` held polls (each answers an empty list); later polls are held as before. */
  endSomeHeldPolls(count: number): void {
    this.wakeups.held.release(count);
  }

  async get(
    principal: Principal,
    address: string,
    uuid: string,
    charge = true,
  ): Promise<PendingMessage> {
    const [message] = await this.served(
      principal,
      address,
      ENTRY_NOT_FOUND,
      charge,
      async (now) => {
        const found = await this.store.repos.mailbox.findPending(address, uuid, now);
        return found ? [found] : [];
      },
    );
    if (!message) throw new NotFoundError(ENTRY_NOT_FOUND);
    return message;
  }

  /** Acknowledges a message: it is gone once this resolves. */
  async delete(principal: Principal, address: string, uuid: string): Promise<void> {
    const { mailbox } = this.store.repos;
    // An agent may acknowledge in its own mailbox alone, which its address names: the mailbox
    // need not be read first (without one, there is no message in it to find). Its owner's
    // right is the mailbox's to say.
    let allowed = principal.kind === 'agent' && principal.address === address;
    if (principal.kind !== 'agent') {
      const found = await mailbox.find(address);
      allowed = found !== undefined && mayRead(principal, found);
    }
    if (!allowed) throw new NotFoundError(ENTRY_NOT_FOUND);
    const tracedAt = this.trace.enabled ? this.clock.now() : undefined;
    if (!(await mailbox.acknowledge(address, uuid, tracedAt))) {
      throw new NotFoundError(ENTRY_NOT_FOUND);
    }
    // The agent acknowledging a message has worked on it.
    if (principal.kind === 'agent') this.trace.seen(address, 'call', true);
    this.trace.changed(address);
  }

  /** Acknowledges every message waiting in the mailbox: none is listed again. */
  async deleteAll(principal: Principal, address: string): Promise<void> {
    const { mailbox } = this.store.repos;
    const found = await mailbox.find(address);
    if (!found || !mayRead(principal, found)) throw new NotFoundError(MAILBOX_NOT_FOUND);
    const now = this.clock.now();
    const deleted = await mailbox.acknowledgeAll(
      address,
      now,
      this.trace.enabled ? now : undefined,
    );
    if (principal.kind === 'agent') this.trace.seen(address, 'call', true);
    if (deleted > 0) this.trace.changed(address);
  }

  /** The mailbox's quarantined messages, for its owner only. */
  async listQuarantined(
    principal: Principal,
    address: string,
    page: MailboxPage,
  ): Promise<QuarantinedMessage[]> {
    await this.ownedMailbox(principal, address, MAILBOX_NOT_FOUND);
    return this.store.repos.mailbox.listQuarantined(address, page);
  }

  /** Deletes a quarantined message, for the mailbox's owner only. */
  async deleteQuarantined(principal: Principal, address: string, uuid: string): Promise<void> {
    await this.ownedMailbox(principal, address, ENTRY_NOT_FOUND);
    if (!(await this.store.repos.mailbox.deleteQuarantined(address, uuid))) {
      throw new NotFoundError(ENTRY_NOT_FOUND);
    }
  }

  private async ownedMailbox(
    principal: Principal,
    address: string,
    notFound: string,
  ): Promise<MailboxRow> {
    const found = await this.store.repos.mailbox.find(address);
    if (!found || principal.kind !== 'user' || principal.userId !== found.user_id) {
      throw new NotFoundError(notFound);
    }
    return found;
  }

  /**
   * The messages waiting for any agent, oldest first, for the operator (the command line): no
   * owner check, nothing charged or traced as read.
   */
  listPendingAsOperator(address: string, page: MailboxPage): Promise<PendingMessage[]> {
    return this.store.repos.mailbox.listPending(address, this.clock.now(), page);
  }

  /** The messages waiting in every mailbox and the bytes they hold, for the operator. */
  pendingTotals(): Promise<{ messages: number; bytes: number }> {
    return this.store.repos.mailbox.totals();
  }

  /** Whether the agent has a mailbox to deliver to (the readiness probe). */
  async isReady(address: string): Promise<boolean> {
    return (await this.store.repos.mailbox.find(address)) !== undefined;
  }

  /**
   * Deletes expired messages (tracing each as expired unread) and trace rows older than the
   * retention period in bounded batches, each its own short transaction so that
   * submissions are not held up; returns how many went.
   */
  async sweepExpired(): Promise<number> {
    const { mailbox } = this.store.repos;
    const { sweepBatchSize: size, sweepMaxBatches: maxBatches } = this.policy;
    let swept = await inBatches(size, maxBatches, async () => {
      const { removed, traced } = await mailbox.sweep(this.clock.now(), size, this.trace.enabled);
      this.trace.recorded(traced);
      return removed;
    });
    // The uuids of acknowledged messages go when the messages would have expired.
    await inBatches(size, maxBatches, () => mailbox.sweepReplays(this.clock.now(), size));
    // Quarantined messages expire alike; there are few, one batch a run keeps up.
    swept += await mailbox.sweepQuarantined(this.clock.now(), size);
    // The trace is kept as long as the messages it describes could be.
    await this.trace.prune(this.clock.now(), this.policy.retentionMs, size, maxBatches);
    return swept;
  }

  /**
   * Reads messages of the mailbox at `address` for a caller who may read it, unless the
   * owner's transfer quota is spent, and adds the bytes served to this period's usage when
   * `charge` is set.
   */
  private async served(
    principal: Principal,
    address: string,
    notFound: string,
    charge: boolean,
    read: (now: number) => Promise<PendingMessage[]>,
    reading?: StoredMessage['reading'],
  ): Promise<PendingMessage[]> {
    const now = this.clock.now();
    const period = usagePeriod(now);
    const { mailbox } = this.store.repos;
    if (principal.kind === 'agent') this.trace.seen(address, 'poll');
    // The mailbox and its owner's quota as the commit that woke this poll read them, in the
    // same period: milliseconds older than a read now, and one round trip of the database less
    // before the answer. A transfer counted in between (another poll of the agent's) is not
    // seen, as two polls side by side do not see each other's.
    const known = reading?.period === period ? reading.found : undefined;
    // Neither read waits for the other (on PostgreSQL they go out on two connections); the
    // messages are returned only once the caller and the quota have been checked.
    const [found, messages] = await Promise.all([
      known ?? mailbox.findWithOwnerUsage(address, period),
      read(now),
    ]);
    if (!found || !mayRead(principal, found.mailbox)) throw new NotFoundError(notFound);
    const limit = this.usage.limitsWith(found.overrides).bytesTransferredPerMonth;
    const transferred = found.counters.bytes_transferred;
    // The oldest messages that fit in what is left of the quota; never past it.
    let bytes = 0;
    let fitting = 0;
    for (const message of messages) {
      if (transferred + bytes + Number(message.size) > limit) break;
      bytes += Number(message.size);
      fitting += 1;
    }
    if (transferred >= limit || (fitting === 0 && messages.length > 0)) {
      throw new QuotaExceededError(`Transfer quota reached ${transferred} / ${limit}`);
    }
    const served = messages.slice(0, fitting);
    const handed: HandOut = {
      owner: found.mailbox.user_id,
      day: usageDay(now),
      bytes: charge ? bytes : 0,
    };
    // Handed to the agent; its owner looking (the console) is not a delivery.
    if (charge && principal.kind === 'agent') {
      // Handed messages, the agent works (an empty poll is waiting).
      if (served.length > 0) this.trace.seen(address, 'poll', true);
      handed.polled = this.trace.pollsDue(address, served, 'agent');
      // A kept message the agent has been handed is its to delete: the proxy would deliver
      // it a second time.
      const kept = served.filter((message) => message.next_forward_at !== null);
      if (kept.length > 0) handed.kept = kept.map((message) => message.uuid);
    }
    if (handed.bytes > 0 || handed.polled || handed.kept) await mailbox.handOut(handed);
    if (handed.polled) this.trace.changed(address);
    return served;
  }
}

/** How a poll answers: `err` null and its messages (maybe none), or the error it ends in. */
export type PollCallback = (err: unknown, messages: PendingMessage[]) => void;

/** Answers `done` once `messages` settles. */
function answerWith(messages: Promise<PendingMessage[]>, done: PollCallback): void {
  messages.then(
    (found) => done(null, found),
    (err: unknown) => done(err, []),
  );
}

/**
 * An agent's poll of its empty mailbox, held (see {@link MailboxService.poll}): it reads, and
 * while it finds nothing waits to be woken and reads again, until its deadline. Waiting, a held
 * poll is this one object among the held polls, with no suspended function, promise or timer of its
 * own: thousands of them wait at once.
 */
class HeldPoll extends Waiter {
  private readonly done: PollCallback;
  /** When the poll began, by the service's clock (presence follows it by this). */
  private readonly started: number;
  private reading = false;
  /** Why the wait ended while a read was under way, if it did. */
  private wokenWhileReading: WakeReason | undefined;
  /** What this process stored for the agent, when that ended it. */
  private deliveredWhileReading: readonly StoredMessage[] | undefined;

  constructor(
    private readonly service: MailboxService,
    private readonly held: HeldPolls,
    private readonly principal: Principal,
    address: string,
    private readonly page: MailboxPage,
    private readonly charge: boolean,
    how: {
      deadline: number;
      departure: Departure | undefined;
      started: number;
      done: PollCallback;
    },
  ) {
    super(address, how.deadline, how.departure);
    this.done = how.done;
    this.started = how.started;
  }

  /** Reads; while it finds nothing, waits and reads again. */
  look(): void {
    if (this.deadline <= performance.now()) return this.answer(this.read());
    this.reading = true;
    this.wokenWhileReading = undefined;
    this.deliveredWhileReading = undefined;
    // Waiting starts before the read: a commit in between still wakes this poll.
    this.held.wait(this);
    this.read().then(
      (messages) => {
        if (messages.length > 0) {
          // Released while still reading: the wait's end is noted, not acted on.
          this.release();
          this.reading = false;
          return this.finish(null, messages);
        }
        this.reading = false;
        if (this.wokenWhileReading !== undefined) {
          this.after(this.wokenWhileReading, this.deliveredWhileReading);
        }
      },
      (err: unknown) => {
        this.release();
        this.reading = false;
        this.finish(err, []);
      },
    );
  }

  /** Answers, once: the poll has ended. */
  private finish(err: unknown, messages: PendingMessage[]): void {
    this.service.pollEnded(this.address, this.started);
    this.done(err, messages);
  }

  woken(reason: WakeReason, delivered?: readonly StoredMessage[]): void {
    if (this.reading) {
      this.wokenWhileReading = reason;
      this.deliveredWhileReading = delivered;
    } else {
      this.after(reason, delivered);
    }
  }

  private read(): Promise<PendingMessage[]> {
    return this.service.readPage(this.principal, this.address, this.page, this.charge);
  }

  private answer(messages: Promise<PendingMessage[]>): void {
    messages.then(
      (found) => this.finish(null, found),
      (err: unknown) => this.finish(err, []),
    );
  }

  private after(reason: WakeReason, delivered?: readonly StoredMessage[]): void {
    if (reason === 'closed' || reason === 'aborted' || reason === 'superseded') {
      // Answered on its own turn, not from within the held polls' loop over the polls it ends.
      queueMicrotask(() => this.finish(null, []));
    } else if (reason === 'timeout') {
      // Reads once more, then answers what it finds.
      this.answer(this.read());
    } else {
      // Delivered: answers what this process stored for the agent, as a read would find it
      // (what another process stored is read), or looks again.
      const committed =
        delivered &&
        this.service.committedPage(this.principal, this.address, this.page, this.charge, delivered);
      if (committed) this.answer(committed);
      else this.look();
    }
  }
}

/** The quota a submission of `size` bytes would break, as the error its sender gets. */
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
