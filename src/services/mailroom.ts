import { randomBytes } from 'node:crypto';
import type { Principal } from '../auth/principal.js';
import { challengeResponseCheck, sha256Hex } from '../crypto/index.js';
import { InvalidChallengeError, InvalidSignatureError, UnauthenticatedError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { SignatureChecker } from '../infra/signature-checker.js';
import type { Store } from '../store/index.js';
import type { StoredAgent } from '../store/repositories/agents.js';
import type { V1AgentUpdates, V1ChallengeProof, V1RegistrationRequest } from '../wire/mailroom.js';
import type { AgentsService } from './agents.js';
import type { IdentityService } from './identity.js';

/** The agent a v1 access token stands for, as the auth plugin leaves it on a request. */
export type TokenPrincipal = Extract<Principal, { kind: 'agent' }>;

export interface IssuedToken {
  /** The secret the agent sends back; only its hash is stored. */
  token: string;
  expiresAt: number;
}

export interface MailroomPolicy {
  challengeTtlMs: number;
  tokenTtlMs: number;
}

const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

function hashToken(token: string): string {
  return sha256Hex(token);
}

/** The name a listing created by a v1 registration has until its agent sends its own. */
function provisionalName(address: string): string {
  return `agent ${address.slice(-8)}`;
}

/**
 * The v1 mailroom: what uAgents 0.22 and earlier call (docs/mailbox.md, "v1 mailroom"), as a
 * thin layer over the identity, registry and mailbox of v2. An agent proves its key by signing
 * a challenge and gets a short-lived access token bound to its address, with which it reads and
 * acknowledges its one mailbox (the v2 mailbox, read as the agent itself); a user registers,
 * updates and deletes agents with their API key, as in v2.
 */
export class MailroomService {
  constructor(
    private readonly store: Store,
    private readonly identity: IdentityService,
    private readonly agents: AgentsService,
    private readonly signatures: SignatureChecker,
    private readonly clock: Clock,
    private readonly policy: MailroomPolicy,
  ) {}

  /**
   * A single-use challenge for the address. With a user's key it is bound to that user too
   * (for `POST /v1/agents`, as the v2 identity challenge is); without one, it is an agent's
   * (for `POST /v1/auth/prove`).
   */
  async issueChallenge(principal: Principal, address: string): Promise<string> {
    if (principal.kind === 'user') return this.identity.issueChallenge(principal.userId, address);
    const challenge = randomBytes(32).toString('hex');
    await this.store.repos.mailroom.insertChallenge({
      challenge,
      address,
      expires_at: this.clock.now() + this.policy.challengeTtlMs,
    });
    return challenge;
  }

  /** An access token for the agent that signed the challenge issued to it. */
  async prove(proof: V1ChallengeProof): Promise<IssuedToken> {
    const { address, challenge } = proof;
    const issued = await this.store.repos.mailroom.takeChallenge(challenge, address);
    const now = this.clock.now();
    if (!issued || issued.expires_at <= now) {
      throw new InvalidChallengeError(
        'Invalid challenge: it is unknown, expired, already used, or was issued for another address; ask POST /v1/auth/challenge for a new one',
      );
    }
    const check = challengeResponseCheck(address, challenge, proof.challenge_response);
    if (!(await this.signatures.check(check))) {
      throw new InvalidSignatureError(
        'Invalid challenge response: signature does not match the address',
      );
    }
    const token = randomBytes(32).toString('base64url');
    const expiresAt = now + this.policy.tokenTtlMs;
    await this.store.repos.mailroom.insertToken({
      token_hash: hashToken(token),
      address,
      created_at: now,
      expires_at: expiresAt,
    });
    return { token, expiresAt };
  }

  /** The agent behind an access token, or 401 (the v1 client then fetches a new token). */
  async authenticate(token: string): Promise<TokenPrincipal> {
    const row = TOKEN_PATTERN.test(token)
      ? await this.store.repos.mailroom.findToken(hashToken(token))
      : undefined;
    if (!row || row.expires_at <= this.clock.now()) {
      throw new UnauthenticatedError(
        'Invalid or expired access token: get a new one with POST /v1/auth/challenge and POST /v1/auth/prove',
        'token',
      );
    }
    return { kind: 'agent', address: row.address, validTo: Math.floor(row.expires_at / 1000) };
  }

  /**
   * Proves the agent's identity for the user with the challenge issued to them, then creates
   * its listing and mailbox, or, for an agent of theirs already registered, sets where the
   * proxy forwards to (a mailbox agent has nowhere) and keeps the rest of the listing.
   */
  async register(userId: string, registration: V1RegistrationRequest): Promise<void> {
    const { address } = registration;
    await this.identity.prove(userId, {
      address,
      challenge: registration.challenge,
      challenge_response: registration.challenge_response,
    });
    const url = registration.endpoint ?? null;
    const existing = await this.store.repos.agents.find(address);
    if (existing?.user_id === userId) {
      await this.agents.update(userId, { address, redirect_url: url });
      return;
    }
    await this.agents.register(userId, {
      address,
      name: provisionalName(address),
      url,
      agent_type: 'uagent',
    });
  }

  /**
   * Sets the name and the profile fields given; a field left out or null keeps what is stored
   * (a 0.22 agent sends its details on every connect, and null for those it has none of).
   */
  async update(userId: string, address: string, updates: V1AgentUpdates): Promise<StoredAgent> {
    const { profile } = await this.agents.get(userId, address);
    return this.agents.update(userId, {
      address,
      name: updates.name,
      profile: {
        ...profile,
        readme: updates.readme ?? profile.readme,
        avatar_url: updates.avatar_url ?? profile.avatar_url,
        description: updates.short_description ?? profile.description,
      },
    });
  }

  delete(userId: string, address: string): Promise<void> {
    return this.agents.delete(userId, address);
  }

  /** Removes expired challenges and tokens (a housekeeping task). */
  purgeExpired(): Promise<number> {
    return this.store.repos.mailroom.deleteExpired(this.clock.now());
  }
}
