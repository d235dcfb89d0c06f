import { randomBytes } from 'node:crypto';
import { challengeResponseCheck } from '../crypto/index.js';
import { ConflictError, InvalidChallengeError, InvalidSignatureError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { SignatureChecker } from '../infra/signature-checker.js';
import type { Store } from '../store/index.js';
import type { IdentityProof } from '../wire/identity.js';

/**
 * Identity: a user proves control of an agent key by signing a challenge issued to them for
 * that address. The first proof creates the identity; later proofs by the same user re-prove it.
 */
export class IdentityService {
  constructor(
    private readonly store: Store,
    private readonly signatures: SignatureChecker,
    private readonly clock: Clock,
    private readonly challengeTtlMs: number,
  ) {}

  async issueChallenge(userId: string, address: string): Promise<string> {
    const challenge = randomBytes(32).toString('hex');
    await this.store.repos.challenges.insert({
      challenge,
      user_id: userId,
      address,
      expires_at: this.clock.now() + this.challengeTtlMs,
    });
    return challenge;
  }

  /**
   * Returns the address of the proven identity, which `userId` then owns. A member acting for
   * a team (`actingUserId`) may use a challenge issued to themself: uagents-core asks for the
   * challenge without `x-team` and sends the proof with it.
   */
  async prove(userId: string, proof: IdentityProof, actingUserId?: string): Promise<string> {
    const { address } = proof;
    const challenges = this.store.repos.challenges;
    const issued =
      (await challenges.takeFor(proof.challenge, userId, address)) ??
      (actingUserId === undefined
        ? undefined
        : await challenges.takeFor(proof.challenge, actingUserId, address));
    if (!issued || issued.expires_at <= this.clock.now()) {
      throw new InvalidChallengeError(
        'Invalid challenge: it is unknown, expired, already used, or was issued for another account or address',
      );
    }
    const check = challengeResponseCheck(address, proof.challenge, proof.challenge_response);
    if (!(await this.signatures.check(check))) {
      throw new InvalidSignatureError(
        'Invalid challenge response: signature does not match the address',
      );
    }
    const owner = await this.store.repos.identities.claim(address, userId, this.clock.now());
    if (owner !== userId) {
      throw new ConflictError('Agent address is already registered by another account');
    }
    return address;
  }

  /** Drops challenges nobody used; called by the housekeeping timer. */
  purgeExpiredChallenges(): Promise<number> {
    return this.store.repos.challenges.deleteExpired(this.clock.now());
  }
}
