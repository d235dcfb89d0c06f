import type { EnvelopeFields } from '../../src/crypto/index.js';
import { makeEnvelope, TestIdentity, type SHalf } from '../../test/kit/uagent.js';

/** Agents with keys, made once; signing is the slow part (~0.4 ms per key or signature). */
export function makeIdentities(count: number): TestIdentity[] {
  return Array.from({ length: count }, () => TestIdentity.random());
}

/** Agents whose keys derive from `${prefix} ${i}`, so a worker thread can rebuild them. */
export function seededIdentities(prefix: string, count: number): TestIdentity[] {
  return Array.from({ length: count }, (_, i) => TestIdentity.fromSeed(`${prefix} ${i}`));
}

export interface EnvelopeBatch {
  /** The JSON bodies to submit, each about `bytes` long. */
  bodies: string[];
  envelopes: EnvelopeFields[];
}

/** A payload JSON text that makes an envelope from `sender` about `bytes` long in JSON. */
function paddedPayload(sender: TestIdentity, target: string, bytes: number): string {
  const probe = JSON.stringify(
    sender.signEnvelope(
      makeEnvelope({ sender: sender.address, target, payloadJson: '', nonce: 0 }),
    ),
  );
  const wrapper = '{"text":""}';
  // base64 turns 3 payload bytes into 4 characters.
  const textLength = Math.floor(((bytes - probe.length) * 3) / 4) - wrapper.length;
  return JSON.stringify({ text: 'x'.repeat(Math.max(0, textLength)) });
}

/**
 * `count` envelopes signed like uAgents signs them, sent round-robin from `senders` to
 * `targets`, each with its own session and nonce so none is a duplicate of another. s lands
 * in the high and low half in turn: Python's signer sends both, and both must verify.
 * `firstIndex` makes envelopes `firstIndex`… of a larger set, one slice of it at a time.
 */
export function signedEnvelopes(
  count: number,
  options: { senders: TestIdentity[]; targets: string[]; bytes?: number; firstIndex?: number },
): EnvelopeBatch {
  const { senders, targets } = options;
  const payloadJson = paddedPayload(senders[0]!, targets[0]!, options.bytes ?? 600);
  const envelopes: EnvelopeFields[] = [];
  const first = options.firstIndex ?? 0;
  for (let i = first; i < first + count; i++) {
    const sender = senders[i % senders.length]!;
    const s: SHalf = i % 2 === 0 ? 'high' : 'low';
    envelopes.push(
      sender.signEnvelope(
        makeEnvelope({
          sender: sender.address,
          target: targets[i % targets.length]!,
          payloadJson,
          nonce: i,
        }),
        { s },
      ),
    );
  }
  return { envelopes, bodies: envelopes.map((envelope) => JSON.stringify(envelope)) };
}
