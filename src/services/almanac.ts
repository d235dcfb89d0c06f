import {
  almanacSignatureCheck,
  almanacSignerAddress,
  protocolManifestDigest,
  unlessMalformed,
  type AlmanacNetworkPrefix,
  type AlmanacSignedFields,
} from '../crypto/index.js';
import { BadRequestError, InvalidSignatureError, NotFoundError } from '../errors.js';
import type { Clock } from '../infra/clock.js';
import type { ChangeFeed } from '../infra/change-feed.js';
import { GroupCommit, type ItemOutcome } from '../infra/group-commit.js';
import type { SignatureChecker } from '../infra/signature-checker.js';
import type { Repositories, Store } from '../store/index.js';
import type { AlmanacRegistrationRow, AlmanacStatusRow } from '../store/repositories/almanac.js';
import type {
  AgentRegistrationAttestation,
  AgentStatusUpdate,
  AlmanacMetadata,
  ProtocolManifest,
} from '../wire/almanac.js';
import type { Endpoint } from '../wire/common.js';
import { canonicalAgentAddress } from '../wire/formats.js';

/** How long a registration resolves after it was signed (uAgents re-registers hourly). */
export const REGISTRATION_LIFETIME_MS = 48 * 3600 * 1000;
/** The most registrations one transaction writes. */
const MAX_REGISTRATION_GROUP = 256;
/** How far ahead of our clock a signed timestamp may be. */
const MAX_CLOCK_AHEAD_MS = 5 * 60 * 1000;

const MAILBOX_SUBMIT_PATH = '/v2/agents/mailbox/submit';
const PROXY_SUBMIT_PATH = '/v2/agents/proxy/submit';
/** What uAgents 0.22 and earlier advertise (the v1 mailroom, docs/mailbox.md). */
const V1_MAILBOX_SUBMIT_PATH = '/v1/submit';
const V1_PROXY_SUBMIT_PATH = '/v1/proxy/submit';

const MANIFEST_NOT_FOUND = 'manifest not found';

/** A digest with its prefix (`proto:`, `model:`), whether it came with it or not. */
function prefixed(prefix: string, digest: string): string {
  return digest.startsWith(prefix) ? digest : `${prefix}${digest}`;
}

/**
 * Orders versions such as `1.10.0` after `1.9`: part by part, numerically where both parts
 * are numbers, else as text.
 */
function compareVersions(a: string, b: string): number {
  const left = a.split('.');
  const right = b.split('.');
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    const x = left[i] ?? '0';
    const y = right[i] ?? '0';
    const order =
      /^\d+$/.test(x) && /^\d+$/.test(y) ? Number(x) - Number(y) : x < y ? -1 : x > y ? 1 : 0;
    if (order !== 0) return Math.sign(order);
  }
  return 0;
}

export type AlmanacAgentType = 'uagent' | 'mailbox' | 'proxy';

/** An agent's unexpired registration, as resolution reads it. */
export interface AlmanacEntry {
  address: string;
  /**
   * Whether it runs, as search answers it too (docs/almanac.md, "Active"): it has not told the
   * Almanac it stopped, and nothing Agentry knows says it is gone.
   */
  active: boolean;
  type: AlmanacAgentType;
  endpoints: Endpoint[];
  protocols: string[];
  metadata: AlmanacMetadata | null;
  expiresAt: number;
  /** The domain the agent is assigned to. */
  domainName: string | null;
  /** The peer or upstream that answered, for an entry resolved from afar (docs/federation.md). */
  home?: string;
}

/** Where addresses this Almanac does not hold are resolved (the federation service). */
export interface RemoteAlmanac {
  /** The entry from afar; NotFoundError, saying why, when none is found. */
  resolve(address: string, prefix?: AlmanacNetworkPrefix): Promise<AlmanacEntry & { home: string }>;
}

/** How a 400 detail names the signed message it is about. */
type Subject = 'Registration' | 'Status update' | `Attestation ${number}`;

const REGISTRATION: Subject = 'Registration';
const STATUS_UPDATE: Subject = 'Status update';

/** A registration that is new, or declares other protocols than before. */
export interface AlmanacChange {
  address: string;
  isNew: boolean;
  endpoints: string[];
}

/**
 * What a group of registrations did: each one's refusal, if any; who registered; what changed;
 * which of those who registered are agents registered here.
 */
interface StoredRegistrations {
  refusals: (BadRequestError | undefined)[];
  seen: string[];
  changed: AlmanacChange[];
  agents: string[];
}

/**
 * The Almanac: agents register their endpoints with signed attestations and resolve one
 * another here. No credentials: each write is signed by the agent it is about, and accepted
 * only when not older than what is stored for that agent, so a captured message cannot be
 * replayed to roll an agent back across seconds. uAgents signs whole seconds, so writes of the
 * same second are all taken, the last one received winning.
 */
/**
 * Addresses this service answers for itself (chat identities, external A2A agents registered
 * here): each resolves to this service's mailbox endpoint, where what is sent to it arrives.
 */
export interface OwnAddressBook {
  /**
   * The protocols the address speaks when it is one of the book's; undefined when not. Answered
   * without a promise when the book knows from memory: most look-ups of unknown addresses ask
   * every book, and an awaited call per book showed in their p99.
   */
  protocolsOf(address: string): string[] | undefined | Promise<string[] | undefined>;
}

export class AlmanacService {
  /** The books of addresses this service answers for itself. */
  private readonly books: OwnAddressBook[] = [];
  /** Where an address held nowhere here is looked for. */
  private remote: RemoteAlmanac | undefined;
  /** Normalised URL of this service's submit endpoints → the agent type they imply. */
  private readonly ownEndpoints: ReadonlyMap<string, AlmanacAgentType>;
  /** Registrations on their way to the store, written a group per transaction. */
  private readonly registrations = new GroupCommit<AlmanacRegistrationRow, void>(
    (rows) => this.commitRegistrations(rows),
    MAX_REGISTRATION_GROUP,
  );

  constructor(
    private readonly store: Store,
    private readonly signatures: SignatureChecker,
    private readonly clock: Clock,
    private readonly publicUrl: string,
    /** Where what the Almanac stored is told, after the commit (the activity service). */
    private readonly changes: ChangeFeed,
  ) {
    // uAgents builds these as f"{agentverse_url}{path}", so the public URL's own path stays.
    this.ownEndpoints = new Map([
      [normaliseUrl(`${publicUrl}${MAILBOX_SUBMIT_PATH}`), 'mailbox'],
      [normaliseUrl(`${publicUrl}${PROXY_SUBMIT_PATH}`), 'proxy'],
      [normaliseUrl(`${publicUrl}${V1_MAILBOX_SUBMIT_PATH}`), 'mailbox'],
      [normaliseUrl(`${publicUrl}${V1_PROXY_SUBMIT_PATH}`), 'proxy'],
    ]);
  }

  /** After a commit: who registered, and which of them are new or declare something new. */
  private tell(stored: StoredRegistrations): void {
    if (stored.seen.length === 0) return;
    void this.changes.publish([
      {
        kind: 'almanac.registered',
        addresses: stored.seen,
        changed: stored.changed,
        agents: stored.agents,
      },
    ]);
  }

  /**
   * Stores a registration once its signature is checked. Registrations that arrive together
   * are written together, in one transaction (group commit, as for mailbox submits), and each
   * is answered once the transaction holding it has committed.
   */
  async register(attestation: AgentRegistrationAttestation): Promise<void> {
    const row = await this.acceptRegistration(attestation, REGISTRATION);
    await this.registrations.submit(row);
  }

  /**
   * All or nothing: the client learns only the status code of the whole batch and sends it
   * again on any failure, so storing part of it would hide which registrations were lost.
   */
  async registerBatch(attestations: AgentRegistrationAttestation[]): Promise<void> {
    const subjects = attestations.map((_, index): Subject => `Attestation ${index}`);
    // The signatures are checked side by side; a refusal names the first refused attestation.
    const accepted = await Promise.allSettled(
      attestations.map((attestation, index) =>
        this.acceptRegistration(attestation, subjects[index]!),
      ),
    );
    const rows = accepted.map((outcome) => {
      if (outcome.status === 'rejected') throw outcome.reason;
      return outcome.value;
    });
    const stored = await this.store.transaction(async (tx) => {
      const outcome = await this.storeRegistrations(tx, rows, subjects);
      const first = outcome.refusals.find((refusal) => refusal !== undefined);
      if (first) throw first;
      return outcome;
    });
    this.tell(stored);
  }

  /**
   * Writes a group of registrations; a refusal concerns its own alone. On SQLite the group is
   * one transaction (one commit for all of it). On PostgreSQL each pass is one statement,
   * atomic by itself, and the group's registrations do not depend on each other: a
   * transaction around it would add two round trips (its begin and commit) to the one.
   */
  private async commitRegistrations(rows: AlmanacRegistrationRow[]): Promise<ItemOutcome<void>[]> {
    const subjects = rows.map((): Subject => REGISTRATION);
    const stored =
      this.store.dialect === 'postgres'
        ? await this.storeRegistrations(this.store.repos, rows, subjects)
        : await this.store.transaction((tx) => this.storeRegistrations(tx, rows, subjects));
    this.tell(stored);
    return stored.refusals.map((error) =>
      error === undefined ? { ok: true, value: undefined } : { ok: false, error },
    );
  }

  /**
   * Stores `rows` in arrival order, with the protocols each declares, in a few statements
   * whatever their number; answers, row by row, the refusal of one older than the stored
   * registration (undefined: stored, or the stored one sent again). An agent named twice goes
   * in a second pass, so that each statement names every agent once.
   */
  private async storeRegistrations(
    repos: Repositories,
    rows: AlmanacRegistrationRow[],
    subjects: Subject[],
  ): Promise<StoredRegistrations> {
    const refusals: (BadRequestError | undefined)[] = rows.map(() => undefined);
    const seen: string[] = [];
    const changed: AlmanacChange[] = [];
    // Told by the upsert itself: what only agents registered here have (timelines, kept
    // forwards) is then not looked for for the many registrants that are not.
    const agents = new Set<string>();
    let pending = rows.map((_, index) => index);
    while (pending.length > 0) {
      const named = new Set<string>();
      const pass: number[] = [];
      const later: number[] = [];
      for (const index of pending) {
        const { address } = rows[index]!;
        if (named.has(address)) later.push(index);
        else {
          named.add(address);
          pass.push(index);
        }
      }
      const passRows = pass.map((index) => rows[index]!);
      // Search finds agents by protocol through this table, kept in step in the same transaction.
      const digests = new Map(
        passRows.map((row) => [
          row.address,
          (JSON.parse(row.protocols) as string[]).map(normaliseDigest),
        ]),
      );
      const stored = await repos.almanac.register(passRows, digests);
      for (const index of pass) {
        const row = rows[index]!;
        const registered = stored.get(row.address);
        if (registered !== undefined) {
          seen.push(row.address);
          if (registered.agent) agents.add(row.address);
          // Agents re-register every hour with what they declared before.
          if (registered.before === row.protocols) continue;
          changed.push({
            address: row.address,
            isNew: registered.before === undefined,
            endpoints: (JSON.parse(row.endpoints) as Endpoint[]).map(({ url }) => url),
          });
        } else if (!isResent(await repos.almanac.findRegistration(row.address), row)) {
          refusals[index] = olderThanStored(subjects[index]!);
        }
      }
      pending = later;
    }
    return { refusals, seen, changed, agents: [...agents] };
  }

  /** The agent's status; `update.agent_identifier` names it (the route checks the path). */
  async updateStatus(update: AgentStatusUpdate): Promise<void> {
    const { address } = signerOf(update);
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
    if (await almanac.upsertStatus(row)) {
      // Answered once its consequences (presence, the timeline) are written.
      await this.changes.publish([
        { kind: 'almanac.status', address, active: update.is_active, signedAt },
      ]);
      return;
    }
    if (isResent(await almanac.findStatus(address), row)) return;
    throw olderThanStored(STATUS_UPDATE);
  }

  /**
   * The registration of an agent; 404 when there is none, it expired, or is on another network.
   * An address held nowhere here is looked for afar (docs/federation.md) unless `localOnly`.
   */
  async resolve(
    address: string,
    prefix?: AlmanacNetworkPrefix,
    options: { localOnly?: boolean } = {},
  ): Promise<AlmanacEntry> {
    const now = this.clock.now();
    const row = await this.store.repos.almanac.findResolvable(address, now);
    if (!row || row.expires_at <= now) {
      const listed = (await this.resolveListing(address)) ?? (await this.resolveOwn(address));
      if (listed) return listed;
      if (this.remote && !options.localOnly) return this.remote.resolve(address, prefix);
    }
    if (
      !row ||
      row.expires_at <= now ||
      (prefix !== undefined && row.prefix !== null && row.prefix !== prefix)
    ) {
      throw new NotFoundError('agent not found');
    }
    const endpoints = JSON.parse(row.endpoints) as Endpoint[];
    return {
      address,
      active: row.active === 1,
      type: this.typeOf(endpoints),
      endpoints,
      protocols: JSON.parse(row.protocols) as string[],
      metadata: row.metadata === null ? null : (JSON.parse(row.metadata) as AlmanacMetadata),
      expiresAt: row.expires_at,
      domainName: row.domain,
    };
  }

  /**
   * An enrolled agent that registered itself (the agentverse-sdk registers at
   * `POST /v2/agents` with its attestation, and never in the Almanac) resolves to the
   * endpoints of its listing while it has no Almanac registration of its own, active until it
   * says it stopped. A listing does not expire: its record resolves for the next 48 hours.
   */
  private async resolveListing(address: string): Promise<AlmanacEntry | undefined> {
    const { enrolments, agents, almanac } = this.store.repos;
    if (!(await enrolments.find(address))) return undefined;
    const listing = await agents.find(address);
    if (!listing || listing.endpoints.length === 0) return undefined;
    return {
      address,
      active: await almanac.activeAt(address, this.clock.now()),
      type: this.typeOf(listing.endpoints),
      endpoints: listing.endpoints,
      protocols: listing.protocols,
      metadata: null,
      expiresAt: this.clock.now() + REGISTRATION_LIFETIME_MS,
      domainName: (await this.store.repos.domains.list(undefined, address))[0]?.name ?? null,
    };
  }

  /** Addresses held nowhere here are looked for through `remote`. */
  resolvesFromAfar(remote: RemoteAlmanac): void {
    this.remote = remote;
  }

  /**
   * Checks a registration that comes from afar (a peer's answer) as one sent here is checked:
   * its time and its signature. The row it would be stored as; BadRequestError otherwise.
   */
  checkRegistration(attestation: AgentRegistrationAttestation): Promise<AlmanacRegistrationRow> {
    return this.acceptRegistration(attestation, REGISTRATION);
  }

  /** Resolves the addresses of `book` to this service's mailbox endpoint. */
  answersFor(book: OwnAddressBook): void {
    this.books.push(book);
  }

  /**
   * An address this service answers for itself (a chat identity, docs/chat.md; an external A2A
   * agent, docs/a2a.md) resolves to this service's mailbox endpoint, where what agents send it
   * is received.
   */
  private resolveOwn(
    address: string,
  ): AlmanacEntry | undefined | Promise<AlmanacEntry | undefined> {
    for (let i = 0; i < this.books.length; i++) {
      const protocols = this.books[i]!.protocolsOf(address);
      if (protocols instanceof Promise) return this.resolveOwnFrom(i, address, protocols);
      if (protocols !== undefined) return this.ownEntry(address, protocols);
    }
    return undefined;
  }

  /** `resolveOwn` once a book has to read: its answer awaited, the books after it asked. */
  private async resolveOwnFrom(
    index: number,
    address: string,
    reading: Promise<string[] | undefined>,
  ): Promise<AlmanacEntry | undefined> {
    const protocols = await reading;
    if (protocols !== undefined) return this.ownEntry(address, protocols);
    for (const book of this.books.slice(index + 1)) {
      const found = await book.protocolsOf(address);
      if (found !== undefined) return this.ownEntry(address, found);
    }
    return undefined;
  }

  private ownEntry(address: string, protocols: string[]): AlmanacEntry {
    return {
      address,
      active: true,
      type: 'mailbox',
      endpoints: [{ url: this.ownEndpoint('mailbox'), weight: 1 }],
      protocols,
      metadata: null,
      expiresAt: this.clock.now() + REGISTRATION_LIFETIME_MS,
      domainName: null,
    };
  }

  /**
   * Stores a manifest under `metadata.digest`. One that hashes to its digest is verified and
   * replaces an unverified one; one that does not (forged, or see protocolManifestDigest for
   * genuine ones that cannot be verified) is kept only while nothing holds its digest.
   */
  async publishManifest(manifest: ProtocolManifest): Promise<void> {
    const digest = manifest.metadata.digest;
    await this.store.repos.almanac.storeManifest(
      {
        digest,
        manifest: JSON.stringify(manifest),
        // A manifest whose digest cannot be computed (a number JSON cannot hold exactly) is
        // not verified, like any other that does not hash to its digest.
        verified: unlessMalformed(() => protocolManifestDigest(manifest)) === digest ? 1 : 0,
        stored_at: this.clock.now(),
        name: manifest.metadata.name,
        version: manifest.metadata.version,
      },
      manifest.models.map((model) => model.digest),
    );
  }

  /** Accepts the digest with or without its `proto:` prefix: Agentverse's links use the hex alone. */
  async findManifest(digest: string): Promise<ProtocolManifest> {
    const row = await this.store.repos.almanac.findManifest(prefixed('proto:', digest));
    if (!row) throw new NotFoundError(MANIFEST_NOT_FOUND);
    return JSON.parse(row.manifest) as ProtocolManifest;
  }

  /**
   * The latest version of the protocol a name names: of the manifests that hash to their
   * digest, if any does (anyone may publish a manifest under any name), the highest version,
   * then the one stored last.
   */
  async findManifestByName(name: string): Promise<ProtocolManifest> {
    const named = await this.store.repos.almanac.manifestsNamed(name);
    const [latest] = named.sort(
      (a, b) =>
        b.verified - a.verified ||
        compareVersions(b.version ?? '', a.version ?? '') ||
        b.stored_at - a.stored_at,
    );
    if (!latest) throw new NotFoundError(MANIFEST_NOT_FOUND);
    return this.findManifest(latest.digest);
  }

  /**
   * A model (`{digest, schema}`) by its digest, with or without `model:`, as a stored manifest
   * holds it; one that hashes to its digest is read first.
   */
  async findModel(digest: string): Promise<ProtocolManifest['models'][number]> {
    const model = prefixed('model:', digest);
    const row = await this.store.repos.almanac.manifestWithModel(model);
    const found = row
      ? (JSON.parse(row.manifest) as ProtocolManifest).models.find((m) => m.digest === model)
      : undefined;
    if (!found) throw new NotFoundError('model not found');
    return found;
  }

  /** Drops expired registrations and stale statuses; called by the housekeeping timer. */
  purgeExpired(): Promise<number> {
    const now = this.clock.now();
    return this.store.repos.almanac.deleteExpired(now, now - REGISTRATION_LIFETIME_MS);
  }

  /** Checks time and signature, and returns the row to store. */
  private async acceptRegistration(
    attestation: AgentRegistrationAttestation,
    subject: Subject,
  ): Promise<AlmanacRegistrationRow> {
    const identifier = signerOf(attestation);
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

  /**
   * The signed timestamp (unix seconds) in milliseconds, if it lies between one registration
   * lifetime ago (older messages could only be replays: nothing signed then is still valid)
   * and a few minutes ahead (clock skew).
   */
  private checkSignedAt(timestamp: number, name: Subject): number {
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

  private async checkSignature(signed: AlmanacSignedFields, name: Subject): Promise<void> {
    if (!(await this.signatures.check(almanacSignatureCheck(signed)))) {
      throw new InvalidSignatureError(
        `${name} signature does not match its fields and the agent its agent_identifier names`,
      );
    }
  }

  /** `mailbox` or `proxy` when the URL is one of this service's submit endpoints. */
  ownEndpointKind(url: string): 'mailbox' | 'proxy' | undefined {
    const kind = this.ownEndpoints.get(normaliseUrl(url));
    return kind === 'mailbox' || kind === 'proxy' ? kind : undefined;
  }

  /** This service's (v2) submit endpoint of each kind. */
  ownEndpoint(kind: 'mailbox' | 'proxy'): string {
    return `${this.publicUrl}${kind === 'mailbox' ? MAILBOX_SUBMIT_PATH : PROXY_SUBMIT_PATH}`;
  }

  /** `mailbox` or `proxy` when an endpoint is this service's submit URL, as uAgents decides. */
  typeOf(endpoints: Endpoint[]): AlmanacAgentType {
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

/**
 * The agent an identifier names, canonical; the identifier's format was checked at the edge.
 */
export function signerOf({ agent_identifier }: { agent_identifier: string }): {
  prefix: AlmanacNetworkPrefix | null;
  address: string;
} {
  const { prefix, address } = almanacSignerAddress(agent_identifier);
  return { prefix, address: canonicalAgentAddress(address) ?? address };
}

function olderThanStored(name: Subject): BadRequestError {
  return new BadRequestError(
    `${name} is older than the one stored for this agent (replayed or out of order); sign it again with the current time`,
  );
}

/** A protocol digest as stored: `proto:` and hex, however the agent wrote it. */
export function normaliseDigest(digest: string): string {
  return digest.startsWith('proto:') ? digest : `proto:${digest}`;
}

/** Host case, default ports and the like do not make another URL. */
function normaliseUrl(url: string): string {
  try {
    return new URL(url).href;
  } catch {
    return url;
  }
}
