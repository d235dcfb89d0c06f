import type { Principal } from '../auth/principal.js';
import {
  envelopeDigest,
  unlessMalformed,
  userAddressOf,
  type EnvelopeFields,
} from '../crypto/index.js';
import { BadRequestError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { EnvelopeVerifier } from '../infra/signature-checker.js';
import { envelopeFields, type Envelope } from '../wire/mailbox.js';
import type { DeliveryTrace } from './deliveries.js';

/** An envelope that may be delivered. */
export interface AdmittedEnvelope {
  /** The target's address (lower case, as the schema admits it). */
  target: string;
  /** The envelope as it is stored and forwarded: its own fields only, as sent. */
  envelope: EnvelopeFields;
  /** `envelopeDigest` of the envelope. */
  digest: Uint8Array;
}

const UNVERIFIED_ENVELOPE = 'Unable to validate envelope';
export const UNKNOWN_TARGET = 'No registered address found matching envelope target';

/**
 * The checks every submitted envelope passes before delivery, mailbox or proxy (INTERFACE.md
 * §5 steps 2–3), past its shape (the schema checked that every field is one the recipient's
 * client can parse, addresses in the one spelling it recognises): a sender that proved
 * itself, and an expiry not yet passed. Fields the protocol does not define are dropped.
 */
export class EnvelopeAdmission {
  constructor(
    private readonly verifier: EnvelopeVerifier,
    private readonly clock: Clock,
    private readonly trace: DeliveryTrace,
  ) {}

  /**
   * Resolves when the envelope may be delivered. A refused one (400) is traced for its
   * target's owner before the error goes on, whichever way it was being delivered.
   */
  async admit(envelope: Envelope, principal: Principal): Promise<AdmittedEnvelope> {
    try {
      return await this.check(envelope, principal);
    } catch (err) {
      if (err instanceof BadRequestError) await this.trace.refused(envelope, err.message);
      throw err;
    }
  }

  private async check(envelope: Envelope, principal: Principal): Promise<AdmittedEnvelope> {
    let digest: Uint8Array | undefined;
    if (USER_PREFIX.test(envelope.sender)) {
      // A user address is not a key: only the user's own credentials vouch for it.
      if (principal.kind !== 'user' || envelope.sender !== userAddressOf(principal.userId)) {
        throw new BadRequestError(
          `${UNVERIFIED_ENVELOPE}: a message from a user address needs that user's API key`,
        );
      }
      digest = unlessMalformed(() => envelopeDigest(envelope));
    } else {
      digest = await this.verifier.verify(envelope);
    }
    if (!digest) throw new BadRequestError(UNVERIFIED_ENVELOPE);
    if (envelope.expires != null && envelope.expires * 1000 < this.clock.now()) {
      throw new BadRequestError('Envelope expired');
    }
    return { target: envelope.target, envelope: envelopeFields(envelope), digest };
  }
}

/** Branching on the prefix spares agent senders a failed user-address decode (an exception). */
const USER_PREFIX = /^user1/i;
