import type { Principal } from '../auth/principal.js';
import {
  CryptoFormatError,
  envelopeDigest,
  isUserAddress,
  verifiedEnvelopeDigest,
  type EnvelopeFields,
  type SignatureVerifier,
} from '../crypto/index.js';
import { BadRequestError, NotFoundError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { Envelope } from '../wire/mailbox.js';

/**
 * Checks that an envelope is signed by its sender, and yields its digest (the sha256 of
 * its signing bytes, see `envelopeDigest`) when it is; undefined when it is not. Asynchronous
 * so that verification can move off the event loop (worker threads) without changing its
 * callers.
 */
export interface EnvelopeVerifier {
  verify(envelope: EnvelopeFields): Promise<Uint8Array | undefined>;
}

/** Verifies on the calling thread. */
export function inlineEnvelopeVerifier(verifier: SignatureVerifier): EnvelopeVerifier {
  return { verify: async (envelope) => verifiedEnvelopeDigest(verifier, envelope) };
}

/** An envelope that may be delivered. */
export interface AdmittedEnvelope {
  /** The target's canonical address. */
  target: string;
  /** `envelopeDigest` of the envelope. */
  digest: Uint8Array;
}

export const UNVERIFIED_ENVELOPE = 'Unable to validate envelope';
export const UNKNOWN_TARGET = 'No registered address found matching envelope target';

/**
 * The checks every submitted envelope passes before delivery, mailbox or proxy (INTERFACE.md
 * §5 steps 2–3), past its shape (the schema checked that its session is a UUID4 the
 * recipient's client can parse): a sender that proved itself, and an expiry not yet passed.
 */
export class EnvelopeAdmission {
  constructor(
    private readonly verifier: EnvelopeVerifier,
    private readonly clock: Clock,
  ) {}

  /** Resolves when the envelope may be delivered. */
  async admit(envelope: Envelope, principal: Principal): Promise<AdmittedEnvelope> {
    let digest: Uint8Array | undefined;
    if (USER_PREFIX.test(envelope.sender)) {
      // A user address is not a key: only the user's own credentials vouch for it.
      if (principal.kind !== 'user') {
        throw new BadRequestError(
          `${UNVERIFIED_ENVELOPE}: a message from a user address needs the user's API key`,
        );
      }
      digest = isUserAddress(envelope.sender) ? digestUnlessMalformed(envelope) : undefined;
    } else {
      digest = await this.verifier.verify(envelope);
    }
    if (!digest) throw new BadRequestError(UNVERIFIED_ENVELOPE);
    if (envelope.expires != null && envelope.expires * 1000 < this.clock.now()) {
      throw new BadRequestError('Envelope expired');
    }
    return { target: canonicalTarget(envelope.target), digest };
  }
}

/** Branching on the prefix spares agent senders a failed user-address decode (an exception). */
const USER_PREFIX = /^user1/i;

/**
 * The lower-case form a target is registered under. A string that is not an address simply
 * matches no agent; only mixed case, which bech32 forbids, is refused here, because lowering
 * it would deliver to an agent whose client does not recognise the spelling.
 */
function canonicalTarget(target: string): string {
  const lower = target.toLowerCase();
  if (target !== lower && target !== target.toUpperCase()) throw new NotFoundError(UNKNOWN_TARGET);
  return lower;
}

/** The envelope's digest; undefined when its fields cannot be packed as uAgents signs them. */
function digestUnlessMalformed(envelope: EnvelopeFields): Uint8Array | undefined {
  try {
    return envelopeDigest(envelope);
  } catch (err) {
    if (err instanceof CryptoFormatError) return undefined;
    throw err;
  }
}
