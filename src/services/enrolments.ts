import { randomBytes } from 'node:crypto';
import { agentAddressFromSeed } from '../crypto/index.js';
import { ConflictError, ForbiddenError, NotFoundError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../store/index.js';
import type { EnrolmentRow } from '../store/repositories/enrolments.js';
import { handleFromName, handleHeld } from './handles.js';
import type { UsersService } from './users.js';

/** An enrolled address as its owner sees it. */
export interface EnrolmentInfo {
  address: string;
  name: string;
  handle: string;
  createdAt: number;
}

/** An agent just provisioned, with its Agent URI, which holds its key and is shown once. */
export type ProvisionedAgent = EnrolmentInfo & { agentUri: string };

function infoOf(row: EnrolmentRow): EnrolmentInfo {
  return { address: row.address, name: row.name, handle: row.handle, createdAt: row.created_at };
}

/**
 * `https://<handle>:<key>@<host>/<name>`, as the agentverse-sdk reads it: the scheme and host
 * (with its port) of the public URL, the key as it is (its characters need no escaping), the
 * name percent-encoded (the client decodes it). The client keeps no path before the name.
 */
export function agentUri(publicUrl: string, handle: string, seed: string, name: string): string {
  const url = new URL(publicUrl);
  return `${url.protocol}//${handle}:${seed}@${url.host}/${encodeURIComponent(name)}`;
}

/**
 * Agent enrolment: an owner provisions an agent (Agentry makes its key, or takes one the
 * owner brings), which enrols the agent's address to the owner; that agent may then register
 * and update itself with its own attestation, under its owner. Only the address is kept.
 * With open registration on (`AGENTRY_OPEN_AGENT_REGISTRATION`), an agent nobody enrolled
 * registers itself under the user the operator chose, and is enrolled to that user by it.
 */
export class EnrolmentsService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly users: UsersService,
    private readonly publicUrl: string,
    /** The user (name or id) open self-registration files agents under; unset: off. */
    private readonly openRegistrationUser?: string,
  ) {}

  /** Enrols the address of the seed given, or of a new one, and answers its Agent URI once. */
  async provision(
    userId: string,
    request: { name: string; handle?: string; seed?: string },
  ): Promise<ProvisionedAgent> {
    const seed = request.seed ?? randomBytes(32).toString('hex');
    const address = agentAddressFromSeed(seed, 0);
    const handle = request.handle ?? handleFromName(request.name);
    const row: EnrolmentRow = {
      address,
      user_id: userId,
      name: request.name,
      handle,
      created_at: this.clock.now(),
    };
    const enrolled = await this.store.transaction(async (tx) => {
      const identity = await tx.identities.find(address);
      if (identity && identity.user_id !== userId) {
        throw new ConflictError('Agent address is already registered by another account');
      }
      // The agent registers under this handle: one another agent holds (or was enrolled with)
      // would refuse it, so the URI could never register.
      if (await handleHeld(tx, handle, address)) throw handleTaken(handle);
      // Two provisions of one handle at the same instant both pass the check above: the
      // enrolments' unique index lets one of them in.
      const owner = await tx.enrolments.claim(row);
      if (owner === 'handle-taken') throw handleTaken(handle);
      if (owner !== userId) {
        throw new ConflictError('Agent address is already enrolled by another account');
      }
      return tx.enrolments.find(address);
    });
    const info = infoOf(enrolled!);
    return { ...info, agentUri: agentUri(this.publicUrl, handle, seed, request.name) };
  }

  async list(userId: string, limit: number, offset: number): Promise<EnrolmentInfo[]> {
    return (await this.store.repos.enrolments.listForUser(userId, limit, offset)).map(infoOf);
  }

  /** Ends an enrolment: the agent may no longer register itself (its listing stays). */
  async remove(userId: string, address: string): Promise<void> {
    if (!(await this.store.repos.enrolments.delete(address, userId))) {
      throw new NotFoundError(`No enrolment of ${address}`);
    }
  }

  /**
   * The user an agent registers itself under: its enrolling owner, else the open registration
   * user, to whom a registration (`enrolAs`, its name and handle) enrols the agent; 403 saying
   * how to enrol it when there is neither.
   */
  async ownerForSelfRegistration(
    address: string,
    enrolAs?: { name: string; handle?: string | null },
  ): Promise<string> {
    const enrolment = await this.store.repos.enrolments.find(address);
    if (enrolment) return enrolment.user_id;
    if (this.openRegistrationUser !== undefined) {
      const user = await this.users.findUser(this.openRegistrationUser).catch(() => undefined);
      if (user && !enrolAs) return user.id;
      if (user && enrolAs) {
        const handle = enrolAs.handle ?? handleFromName(enrolAs.name);
        const owner = await this.store.repos.enrolments.claim({
          address,
          user_id: user.id,
          name: enrolAs.name,
          handle,
          created_at: this.clock.now(),
        });
        if (owner === 'handle-taken') throw handleTaken(handle);
        return owner;
      }
    }
    throw new ForbiddenError(
      `Agent ${address} is not enrolled here, so it cannot register itself with its attestation. Its owner enrols it by provisioning it (POST /v2/enrolments with the agent's seed, "agentry agents provision", or the console's Agents page), then starts it from the Agent URI given; or registers it with an API key (GET /v2/identity/${address}/challenge, POST /v2/identity, POST /v2/agents)`,
    );
  }
}

/** 409: another agent holds the handle, or was enrolled with it. */
function handleTaken(handle: string): ConflictError {
  return new ConflictError(
    `Handle "${handle}" is already taken by another agent: choose another, or leave it out to have one made from the name`,
  );
}
