import {
  almanacSignatureCheck,
  almanacSignerAddress,
  CryptoFormatError,
  protocolManifestDigest,
  type AlmanacNetworkPrefix,
  type AlmanacSignedFields,
} from '../crypto/index.js';
import {
  BadRequestError,
  InvalidSignatureError,
  NotFoundError,
  RequestValidationError,
  type ValidationIssue,
} from '../errors.js';
import type { Repositories, Store } from '../store/index.js';
import type { AlmanacRegistrationRow, AlmanacStatusRow } from '../store/repositories/almanac.js';
import { isoTimestamp } from '../time.js';
import type { Clock } from './clock.js';
import { agentAddressOr422 } from './identity.js';
import type { SignatureChecker } from './signature-checker.js';

/** How long a registration resolves after it was signed (uAgents re-registers hourly). */
const REGISTRATION_LIFETIME_MS = 48 * 3600 * 1000;
/** How far ahead of our clock a signed timestamp may be. */
const MAX_CLOCK_AHEAD_MS = 5 * 60 * 1000;

const MAILBOX_SUBMIT_PATH = '/v2/agents/mailbox/submit';
const PROXY_SUBMIT_PATH = '/v2/agents/proxy/submit';

export interface AgentEndpoint {
  url: string;
  weight: number;
}

/** uagents-core types it `dict[str, str | list[str] | dict[str, str]]`. */
export type AlmanacMetadata = Record<string, string | string[] | Record<string, string>>;

/** uagents-core `AgentRegistrationAttestation`, as sent (the body schema checked its shape). */
export interface AgentRegistrationAttestation {
  agent_identifier: string;
  protocols: string[];
  endpoints: AgentEndpoint[];
  metadata?: AlmanacMetadata | null;
  timestamp: number;
  signature: string;
}

/** uagents-core `AgentStatusUpdate`. */
export interface AgentStatusUpdate {
  agent_identifier: string;
  is_active: boolean;
  timestamp: number;
  signature: string;
}

export type AlmanacAgentType = 'uagent' | 'mailbox' | 'proxy';

/** What `GET /v1/almanac/agents/{address}` answers; uAgents resolves from it. */
export interface ResolvedAgent {
  address: string;
  status: 'active' | 'inactive';
  type: AlmanacAgentType;
  endpoints: AgentEndpoint[];
  protocols: string[];
  metadata: AlmanacMetadata | null;
  domain_name: null;
  expiry: string;
}

/** A uagents-core protocol manifest (`ProtocolSpecification.manifest()`). */
export interface ProtocolManifest {
  version: string;
  metadata: { name: string; version: string; digest: string; [field: string]: unknown };
  models: { digest: string; schema: Record<string, unknown>; [field: string]: unknown }[];
  interactions: { type: string; request: string; responses: string[]; [field: string]: unknown }[];
  [field: string]: unknown;
}

type Loc = (string | number)[];

interface SignerIdentifier {
  prefix: AlmanacNetworkPrefix | null;
  address: string;
}

const IDENTIFIER_MESSAGE =
  'Value error, agent_identifier must be agent://<agent address>, test-agent://<agent address> or an agent address';

/** Which signed message of the request an error is about. */
interface Subject {
  /** Where it is in the request, for 422 items. */
  loc: Loc;
  /** How a 400 detail names it: "Registration", "Attestation 3", "Status update". */
  name: string;
}

const REGISTRATION: Subject = { loc: ['body'], name: 'Registration' };
const STATUS_UPDATE: Subject = { loc: ['body'], name: 'Status update' };

/**
 * The Almanac: agents register their endpoints with signed attestations and resolve one
 * another here. No credentials: each write is signed by the agent it is about, and accepted
 * only when not older than what is stored for that agent, so a captured message cannot be
 * replayed to roll an agent back across seconds. uAgents signs whole seconds, so writes of the
 * same second are all taken, the last one received winning.
 */
export class AlmanacService {
  /** Normalised URL of this service's submit endpoints → the agent type they imply. */
  private readonly ownEndpoints: ReadonlyMap<string, AlmanacAgentType>;

  constructor(
    private readonly store: Store,
    private readonly signatures: SignatureChecker,
    private readonly clock: Clock,
    publicUrl: string,
  ) {
    // uAgents builds these as f"{agentverse_url}{path}", so the public URL's own path stays.
    this.ownEndpoints = new Map([
      [normaliseUrl(`${publicUrl}${MAILBOX_SUBMIT_PATH}`), 'mailbox'],
      [normaliseUrl(`${publicUrl}${PROXY_SUBMIT_PATH}`), 'proxy'],
    ]);
  }

  async register(attestation: AgentRegistrationAttestation): Promise<void> {
    const identifier = this.identifierOf(attestation, REGISTRATION);
    const row = await this.acceptRegistration(attestation, identifier, REGISTRATION);
    await this.storeRegistration(this.store.repos, row, REGISTRATION);
  }

  /**
   * All or nothing: the client learns only the status code of the whole batch and sends it
   * again on any failure, so storing part of it would hide which registrations were lost.
   */
  async registerBatch(attestations: AgentRegistrationAttestation[]): Promise<void> {
    const subjects: Subject[] = attestations.map((_, index) => ({
      loc: ['body', 'attestations', index],
      name: `Attestation ${index}`,
    }));
    // Every shape problem of the batch in one 422, as pydantic reports them, before any 400.
    const issues: ValidationIssue[] = [];
    const identifiers = attestations.map((attestation, index) => {
      try {
        return this.identifierOf(attestation, subjects[index]!);
      } catch (error) {
        if (!(error instanceof RequestValidationError)) throw error;
        issues.push(...error.issues);
        return undefined;
      }
    });
    if (issues.length > 0) throw new RequestValidationError(issues);
    // The signatures are checked side by side; a refusal names the first refused attestation.
    const accepted = await Promise.allSettled(
      attestations.map((attestation, index) =>
        this.acceptRegistration(attestation, identifiers[index]!, subjects[index]!),
      ),
    );
    const rows = accepted.map((outcome) => {
      if (outcome.status === 'rejected') throw outcome.reason;
      return outcome.value;
    });
    await this.store.transaction(async (tx) => {
      for (const [index, row] of rows.entries()) {
        await this.storeRegistration(tx, row, subjects[index]!);
      }
    });
  }

  async updateStatus(rawAddress: string, update: AgentStatusUpdate): Promise<void> {
    const address = agentAddressOr422(rawAddress, ['path', 'address']);
    const identifier = this.identifierOf(update, STATUS_UPDATE);
    if (identifier.address !== address) {
      throw RequestValidationError.single(
        [...STATUS_UPDATE.loc, 'agent_identifier'],
        'Value error, agent_identifier names another agent than the path',
      );
    }
    const signedAt = this.checkSignedAt(update.timestamp, STATUS_UPDATE);
    const signed = {
      agent_identifier: update.agent_identifier,
      timestamp: update.timestamp,
      is_active: update.is_active,
    };
    await this.checkSignature({ ...signed, signature: update.signature }, STATUS_UPDATE);
    const row: AlmanacStatusRow = {
      address,
      is_active: update.is_active ? 1 : 0,
      signed_at: signedAt,
      signature: update.signature,
      updated_at: this.clock.now(),
    };
    const almanac = this.store.repos.almanac;
    if (await almanac.upsertStatus(row)) return;
    if (isResent(await almanac.findStatus(address), row)) return;
    throw olderThanStored(STATUS_UPDATE);
  }

  /** The registration of an agent; 404 when there is none, it expired, or is on another network. */
  async resolve(rawAddress: string, prefix?: AlmanacNetworkPrefix): Promise<ResolvedAgent> {
    const address = agentAddressOr422(rawAddress, ['path', 'address']);
    const row = await this.store.repos.almanac.findResolvable(address);
    if (
      !row ||
      row.expires_at <= this.clock.now() ||
      (prefix !== undefined && row.prefix !== null && row.prefix !== prefix)
    ) {
      throw new NotFoundError('agent not found');
    }
    const endpoints = JSON.parse(row.endpoints) as AgentEndpoint[];
    return {
      address,
      status: row.is_active === 0 ? 'inactive' : 'active',
      type: this.typeOf(endpoints),
      endpoints,
      protocols: JSON.parse(row.protocols) as string[],
      metadata: row.metadata === null ? null : (JSON.parse(row.metadata) as AlmanacMetadata),
      domain_name: null,
      expiry: isoTimestamp(row.expires_at),
    };
  }

  /**
   * Stores a manifest under `metadata.digest`. One that hashes to its digest is verified and
   * replaces an unverified one; one that does not (forged, or see protocolManifestDigest for
   * genuine ones that cannot be verified) is kept only while nothing holds its digest.
   */
  async publishManifest(manifest: ProtocolManifest): Promise<void> {
    const digest = manifest.metadata.digest;
    await this.store.repos.almanac.storeManifest({
      digest,
      manifest: JSON.stringify(manifest),
      verified: protocolManifestDigest(manifest) === digest ? 1 : 0,
      stored_at: this.clock.now(),
    });
  }

  /** Accepts the digest with or without its `proto:` prefix: Agentverse's links use the hex alone. */
  async findManifest(digest: string): Promise<ProtocolManifest> {
    const key = digest.startsWith('proto:') ? digest : `proto:${digest}`;
    const row = await this.store.repos.almanac.findManifest(key);
    if (!row) throw new NotFoundError('manifest not found');
    return JSON.parse(row.manifest) as ProtocolManifest;
  }

  /**
   * Names (`agent://name`) would come from a name service this server does not have; a 404
   * sends uAgents on to resolve by address, as it does for an unknown name on Agentverse.
   */
  resolveDomain(name: string): never {
    throw new NotFoundError(`domain not found: ${name}`);
  }

  /** Drops expired registrations and stale statuses; called by the housekeeping timer. */
  purgeExpired(): Promise<number> {
    const now = this.clock.now();
    return this.store.repos.almanac.deleteExpired(now, now - REGISTRATION_LIFETIME_MS);
  }

  /** The signer named by `agent_identifier`, its address lower-cased; else a 422. */
  private identifierOf(signed: { agent_identifier: string }, subject: Subject): SignerIdentifier {
    try {
      const { prefix, address } = almanacSignerAddress(signed.agent_identifier);
      return { prefix, address: address.toLowerCase() };
    } catch (error) {
      if (!(error instanceof CryptoFormatError)) throw error;
      throw RequestValidationError.single([...subject.loc, 'agent_identifier'], IDENTIFIER_MESSAGE);
    }
  }

  /** Checks time and signature, and returns the row to store. */
  private async acceptRegistration(
    attestation: AgentRegistrationAttestation,
    identifier: SignerIdentifier,
    subject: Subject,
  ): Promise<AlmanacRegistrationRow> {
    const signedAt = this.checkSignedAt(attestation.timestamp, subject);
    // Exactly what pydantic's model_dump holds: unknown fields dropped, absent metadata null.
    const signed = {
      agent_identifier: attestation.agent_identifier,
      timestamp: attestation.timestamp,
      protocols: attestation.protocols,
      endpoints: attestation.endpoints.map(({ url, weight }) => ({ url, weight })),
      metadata: attestation.metadata ?? null,
    };
    await this.checkSignature({ ...signed, signature: attestation.signature }, subject);
    return {
      address: identifier.address,
      prefix: identifier.prefix,
      endpoints: JSON.stringify(signed.endpoints),
      protocols: JSON.stringify(signed.protocols),
      metadata: signed.metadata === null ? null : JSON.stringify(signed.metadata),
      signed_at: signedAt,
      signature: attestation.signature,
      expires_at: signedAt + REGISTRATION_LIFETIME_MS,
      updated_at: this.clock.now(),
    };
  }

  private async storeRegistration(
    repos: Repositories,
    row: AlmanacRegistrationRow,
    subject: Subject,
  ): Promise<void> {
    if (await repos.almanac.upsertRegistration(row)) return;
    if (isResent(await repos.almanac.findRegistration(row.address), row)) return;
    throw olderThanStored(subject);
  }

  /**
   * The signed timestamp (unix seconds) in milliseconds, if it lies between one registration
   * lifetime ago (older messages could only be replays: nothing signed then is still valid)
   * and a few minutes ahead (clock skew).
   */
  private checkSignedAt(timestamp: number, { name }: Subject): number {
    const signedAt = timestamp * 1000;
    const now = this.clock.now();
    if (signedAt > now + MAX_CLOCK_AHEAD_MS) {
      throw new BadRequestError(
        `${name} timestamp is more than ${MAX_CLOCK_AHEAD_MS / 60_000} minutes in the future; check the agent's clock`,
      );
    }
    if (signedAt + REGISTRATION_LIFETIME_MS <= now) {
      throw new BadRequestError(
        `${name} timestamp is more than ${REGISTRATION_LIFETIME_MS / 3_600_000} hours old; sign it again`,
      );
    }
    return signedAt;
  }

  private async checkSignature(signed: AlmanacSignedFields, { name }: Subject): Promise<void> {
    if (!(await this.signatures.check(almanacSignatureCheck(signed)))) {
      throw new InvalidSignatureError(
        `${name} signature does not match its fields and the agent its agent_identifier names`,
      );
    }
  }

  /** `mailbox` or `proxy` when an endpoint is this service's submit URL, as uAgents decides. */
  private typeOf(endpoints: AgentEndpoint[]): AlmanacAgentType {
    const types = new Set(endpoints.map(({ url }) => this.ownEndpoints.get(normaliseUrl(url))));
    if (types.has('mailbox')) return 'mailbox';
    if (types.has('proxy')) return 'proxy';
    return 'uagent';
  }
}

/**
 * The same signed message again, as a client sends it when its one-second timeout fired
 * after the first copy was stored: answered like the first, and nothing changes.
 */
function isResent(
  stored: { signed_at: number; signature: string } | undefined,
  row: { signed_at: number; signature: string },
): boolean {
  return stored?.signed_at === row.signed_at && stored.signature === row.signature;
}

function olderThanStored({ name }: Subject): BadRequestError {
  return new BadRequestError(
    `${name} is older than the one stored for this agent (replayed or out of order); sign it again with the current time`,
  );
}

/** Host case, default ports and the like do not make another URL. */
function normaliseUrl(url: string): string {
  try {
    return new URL(url).href;
  } catch {
    return url;
  }
}
