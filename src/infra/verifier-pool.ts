import type { Worker } from 'node:worker_threads';
import type { EnvelopeFields, SignatureCheck, SignatureVerifier } from '../crypto/index.js';
import { startWorker } from './worker-threads.js';
import type { EnvelopeVerifier, SignatureChecker } from './signature-checker.js';

export type VerifierKind = SignatureVerifier['kind'];

/** What the pool sends a thread: one envelope, or one prepared signature, to check. */
export type VerificationRequest =
  { id: number; envelope: EnvelopeFields } | { id: number; check: SignatureCheck };

/**
 * The answer to request `id`: for an envelope, its digest if its sender signed it, else null;
 * for a prepared check, whether it passed.
 */
export type VerificationAnswer =
  { id: number; digest: Uint8Array | null } | { id: number; valid: boolean };

interface Waiting {
  resolve(answer: VerificationAnswer): void;
  reject(error: unknown): void;
}

/** The fields the signature covers: a body's other fields could be large. */
function signedFields(envelope: EnvelopeFields): EnvelopeFields {
  return {
    version: envelope.version,
    sender: envelope.sender,
    target: envelope.target,
    session: envelope.session,
    schema_digest: envelope.schema_digest,
    payload: envelope.payload,
    expires: envelope.expires,
    nonce: envelope.nonce,
    signature: envelope.signature,
  };
}

/** One worker thread and the checks it has not answered yet. */
class PoolThread {
  readonly worker: Worker;
  readonly waiting = new Map<number, Waiting>();

  constructor(verifier: VerifierKind, onExit: (thread: PoolThread, error: unknown) => void) {
    this.worker = startWorker(import.meta.url, 'verifier-worker', { workerData: { verifier } });
    this.worker.on('message', (answer: VerificationAnswer) => {
      const waiting = this.waiting.get(answer.id);
      this.waiting.delete(answer.id);
      waiting?.resolve(answer);
    });
    let failure: unknown;
    this.worker.on('error', (error) => (failure = error));
    this.worker.on('exit', (code) =>
      onExit(this, failure ?? new Error(`a verifier thread exited with code ${code}`)),
    );
  }

  send(request: VerificationRequest, waiting: Waiting): void {
    this.waiting.set(request.id, waiting);
    this.worker.postMessage(request);
  }

  failAll(error: unknown): void {
    for (const waiting of this.waiting.values()) waiting.reject(error);
    this.waiting.clear();
  }
}

/**
 * Checks signatures in worker threads (envelopes, identity proofs, Almanac attestations), so
 * that the event loop only parses, stores and answers. Each check goes to the thread with the
 * fewest unanswered ones as soon as it is asked for: the thread starts on it while the event
 * loop reads the next request, which measured better than gathering the checks of one turn
 * of the loop into one message. A thread starts when there is work for it, so one that died
 * is replaced by the next check; `close` stops them all.
 */
export class VerifierPool implements EnvelopeVerifier, SignatureChecker {
  private readonly threads: (PoolThread | undefined)[];
  private nextId = 0;
  private closed = false;

  /** `verifier` names the implementation the threads use, as the inline verifier would. */
  constructor(
    size: number,
    private readonly verifier: VerifierKind,
  ) {
    if (!Number.isInteger(size) || size < 1) {
      throw new RangeError(`a verifier pool needs at least one thread, got ${size}`);
    }
    this.threads = Array.from({ length: size }, () => undefined);
  }

  async verify(envelope: EnvelopeFields): Promise<Uint8Array | undefined> {
    const answer = await this.ask({ id: this.nextId++, envelope: signedFields(envelope) });
    return 'digest' in answer ? (answer.digest ?? undefined) : undefined;
  }

  async check(check: SignatureCheck | undefined): Promise<boolean> {
    if (check === undefined) return false;
    const answer = await this.ask({ id: this.nextId++, check });
    return 'valid' in answer && answer.valid;
  }

  private ask(request: VerificationRequest): Promise<VerificationAnswer> {
    if (this.closed) return Promise.reject(new Error('the verifier pool is closed'));
    let least: PoolThread | undefined;
    for (const [slot, running] of this.threads.entries()) {
      const thread = running ?? this.startThread(slot);
      if (!least || thread.waiting.size < least.waiting.size) least = thread;
    }
    return new Promise((resolve, reject) => least!.send(request, { resolve, reject }));
  }

  /** Stops the threads; checks not answered yet fail. */
  async close(): Promise<void> {
    this.closed = true;
    const threads = this.threads.splice(0).filter((thread) => thread !== undefined);
    const error = new Error('the verifier pool is closed');
    for (const thread of threads) thread.failAll(error);
    await Promise.all(threads.map((thread) => thread.worker.terminate()));
  }

  private startThread(slot: number): PoolThread {
    const thread = new PoolThread(this.verifier, (exited, error) => {
      exited.failAll(error);
      if (this.threads[slot] === exited) this.threads[slot] = undefined;
    });
    this.threads[slot] = thread;
    return thread;
  }
}
