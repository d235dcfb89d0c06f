import { call } from './http.js';
import { makeEnvelope, TestIdentity } from './uagent.js';

/** What became of one submit. */
export type SubmitOutcome =
  | { kind: 'answered'; status: number; at: number }
  /** The connection was refused: nothing was sent, the client may go elsewhere. */
  | { kind: 'refused'; at: number }
  /** Sent, but the connection broke before an answer came. */
  | { kind: 'cut'; error: string; at: number };

export interface SubmitLoadOptions {
  /** The base URL to send the next submit to (lets a test move load between replicas). */
  target: () => string;
  recipient: TestIdentity;
  submitters: number;
  /** Stops by itself after this long at most. */
  maxMs: number;
  /** Hears each outcome with the URL it came from. */
  onOutcome?: (outcome: SubmitOutcome, url: string) => void;
}

/**
 * Steady submit load: `submitters` senders each submit signed envelopes one after another
 * until `stop` (or `maxMs`). Each 200 is recorded with the time it came, as is every other
 * outcome, so that a test can tell answered, refused and cut requests apart.
 */
export class SubmitLoad {
  /** Signatures of the envelopes answered 200, with the time of the answer. */
  readonly acknowledged: { signature: string; at: number }[] = [];
  readonly outcomes: SubmitOutcome[] = [];
  private stopped = false;
  private readonly done: Promise<void>;

  constructor(private readonly options: SubmitLoadOptions) {
    const deadline = Date.now() + options.maxMs;
    this.done = Promise.all(
      Array.from({ length: options.submitters }, (_, index) => this.submitter(index, deadline)),
    ).then(() => undefined);
  }

  private async submitter(index: number, deadline: number): Promise<void> {
    const sender = TestIdentity.random();
    for (let n = 0; !this.stopped && Date.now() < deadline; n++) {
      const envelope = sender.signEnvelope(
        makeEnvelope({
          sender: sender.address,
          target: this.options.recipient.address,
          payloadJson: `{"submitter":${index},"n":${n}}`,
          nonce: n,
        }),
      );
      const url = this.options.target();
      let outcome: SubmitOutcome;
      try {
        const res = await call(url, 'POST', '/v2/agents/mailbox/submit', { body: envelope });
        outcome = { kind: 'answered', status: res.status, at: Date.now() };
        if (res.status === 200) {
          this.acknowledged.push({ signature: envelope.signature!, at: outcome.at });
        }
      } catch (err) {
        const code = ((err as { cause?: { code?: string } }).cause ?? {}).code ?? String(err);
        const at = Date.now();
        outcome =
          code === 'ECONNREFUSED' ? { kind: 'refused', at } : { kind: 'cut', error: code, at };
      }
      this.outcomes.push(outcome);
      this.options.onOutcome?.(outcome, url);
      if (outcome.kind !== 'answered' || outcome.status !== 200) {
        // Back off a little before the next try, as a client would.
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
  }

  /** Waits until at least `count` submits have been acknowledged. */
  async acknowledgedAtLeast(count: number, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.acknowledged.length < count) {
      if (Date.now() > deadline) {
        throw new Error(`only ${this.acknowledged.length} of ${count} submits acknowledged`);
      }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /** Stops the senders and waits for their last requests. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }
}

/** Signatures of every envelope waiting in `recipient`'s mailbox, read over HTTP as it would. */
export async function mailboxSignatures(
  url: string,
  recipient: TestIdentity,
): Promise<Set<string>> {
  const now = Math.floor(Date.now() / 1000);
  const authorization = `Agent ${recipient.attestation({ validFrom: now, validTo: now + 1000 })}`;
  const listed = new Set<string>();
  for (let offset = 0; ; offset += 1000) {
    const page = await call(
      url,
      'GET',
      `/v2/agents/${recipient.address}/mailbox?limit=1000&offset=${offset}`,
      { authorization },
    );
    if (page.status !== 200) throw new Error(`listing the mailbox: ${page.status} ${page.text}`);
    for (const item of page.body) listed.add(item.envelope.signature);
    if (page.body.length < 1000) break;
  }
  return listed;
}
