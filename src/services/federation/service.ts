import type { Dispatcher } from 'undici';
import type { Principal, UserPrincipal } from '../../auth/principal.js';
import type { FederationPeer } from '../../config/index.js';
import { BadRequestError, DomainError, NotFoundError } from '../../errors.js';
import type { ChangeConsumer, ChangeOf } from '../../infra/change-feed.js';
import type { Clock } from '../../infra/clock.js';
import type { Store } from '../../store/index.js';
import type { AlmanacRegistrationRow } from '../../store/repositories/almanac.js';
import { AlmanacAgent, type AgentRegistrationAttestation } from '../../wire/almanac.js';
import { bodyChecker } from '../../wire/check.js';
import { isoTimestamp, type Endpoint } from '../../wire/common.js';
import {
  type FederationIdentity,
  FederatedSearchResults,
  PeerRecord,
  type FederatedListing,
  type FederationStatus,
  type PublishingSetting,
} from '../../wire/federation.js';
import { canonicalAgentAddress } from '../../wire/formats.js';
import type { AgentsService } from '../agents.js';
import type { AlmanacAgentType, AlmanacService, RemoteAlmanac } from '../almanac.js';
import type { SearchService } from '../search.js';
import { ExchangeFault, exchange } from './exchange.js';
import { Healths } from './health.js';
import type { InstanceIdentity } from './identity.js';
import { RemoteRecords, type RemoteEntry } from './remote-records.js';

/** How long "no upstream knows this address" is kept: a new registration shows soon. */
const NEGATIVE_CACHE_MS = 10_000;
/**
 * Sent with each look-up at a plain upstream: an Agentry that gets it answers from what it holds
 * itself, so two instances naming each other as upstreams cannot ask each other in a loop.
 */
export const FEDERATED_LOOKUP_HEADER = 'x-agentry-via';

export interface FederationPolicy {
  publicUrl: string;
  peers: FederationPeer[];
  upstreams: string[];
  timeoutMs: number;
  cacheMs: number;
}

/** What one peer or upstream said about an address. */
type Answer =
  | { kind: 'found'; url: string; entry: RemoteEntry; signedAt: number; fromPeer: boolean }
  | { kind: 'absent'; url: string }
  | { kind: 'fault'; url: string; reason: string };

type Outcome = { entry: RemoteEntry } | { entry: undefined; reason: string };

/**
 * Federation (docs/federation.md): resolves outward what the Almanac does not hold, through
 * the peers (other Agentry instances, asked with this instance's signature) and the plain
 * upstreams (Almanac API services); answers the peers' look-ups of the agents published here;
 * relays the registrations of published agents to the plain upstreams as the agents renew them.
 */
export class FederationService implements RemoteAlmanac, ChangeConsumer<'almanac.registered'> {
  readonly kinds = ['almanac.registered'] as const;
  private readonly records = new RemoteRecords();
  private readonly health = new Healths();
  /** Look-ups under way, by key: a burst of sends to one address asks once. */
  private readonly asking = new Map<string, Promise<Outcome>>();
  private readonly peerRecordIssues = bodyChecker(PeerRecord);
  private readonly almanacRecordIssues = bodyChecker(AlmanacAgent);
  private readonly searchResultIssues = bodyChecker(FederatedSearchResults);

  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly identity: InstanceIdentity,
    private readonly almanac: AlmanacService,
    private readonly agents: AgentsService,
    private readonly search: SearchService,
    /** Peers and upstreams are the operator's choice: reached wherever they are. */
    private readonly dispatcher: Dispatcher,
    private readonly policy: FederationPolicy,
  ) {}

  // ---- Resolving outward -------------------------------------------------------------------

  /** Whether the operator named any peer or upstream to resolve outward through. */
  get asksAnyone(): boolean {
    return this.policy.peers.length > 0 || this.policy.upstreams.length > 0;
  }

  /**
   * The registration of an address this instance does not hold, from the peers and upstreams:
   * kept for its lifetime (within the cache setting); 404 with what each said otherwise.
   */
  async resolve(address: string, prefix?: 'agent' | 'test-agent'): Promise<RemoteEntry> {
    if (!this.asksAnyone) {
      throw new NotFoundError('agent not found');
    }
    const key = `${prefix ?? '*'} ${address}`;
    const now = this.clock.now();
    const kept = this.records.get(key, now);
    if (kept) {
      if (!kept.entry) throw notFoundAfar(kept.reason);
      this.records.answered(kept.entry, now, true);
      return kept.entry;
    }
    let pending = this.asking.get(key);
    if (!pending) {
      pending = this.ask(key, address, prefix).finally(() => this.asking.delete(key));
      this.asking.set(key, pending);
    }
    const outcome = await pending;
    if (!outcome.entry) throw notFoundAfar(outcome.reason);
    this.records.answered(outcome.entry, this.clock.now(), false);
    return outcome.entry;
  }

  /** Where an address was last answered from, if this process resolved it from afar. */
  homeOf(address: string): string | undefined {
    return this.records.homeOf(address);
  }

  private async ask(
    key: string,
    address: string,
    prefix: 'agent' | 'test-agent' | undefined,
  ): Promise<Outcome> {
    const answers = await Promise.all([
      ...this.policy.peers.map((peer) =>
        this.guarded(peer.url, this.askPeer(peer, address, prefix)),
      ),
      ...this.policy.upstreams.map((url) =>
        this.guarded(url, this.askUpstream(url, address, prefix)),
      ),
    ]);
    const found = answers
      .filter((answer) => answer.kind === 'found')
      // A signed registration beats an unsigned record; of two, the one signed later wins.
      .sort((a, b) => Number(b.fromPeer) - Number(a.fromPeer) || b.signedAt - a.signedAt);
    const now = this.clock.now();
    const best = found[0];
    if (best) {
      const until = Math.min(now + this.policy.cacheMs, best.entry.expiresAt);
      if (until > now) this.records.keep(key, { entry: best.entry, reason: '', until });
      return { entry: best.entry };
    }
    const reason = answers
      .map((answer) =>
        answer.kind === 'fault'
          ? `${answer.url} ${answer.reason}`
          : `${answer.url} does not know it`,
      )
      .join('; ');
    // Only a clean "no" from every one is kept: one that failed is asked again next time.
    if (answers.every((answer) => answer.kind === 'absent')) {
      const until = now + Math.min(NEGATIVE_CACHE_MS, this.policy.cacheMs);
      if (until > now) this.records.keep(key, { entry: undefined, reason, until });
    }
    return { entry: undefined, reason };
  }

  /** An answer, or the fault that stands for it (counted against the target's health). */
  private async guarded(url: string, asked: Promise<Answer>): Promise<Answer> {
    try {
      const answer = await asked;
      this.health.ok(url, this.clock.now());
      return answer;
    } catch (err) {
      // A domain error is this instance's own (no sealing key to sign with): its words say what to do.
      const reason =
        err instanceof ExchangeFault
          ? err.message
          : err instanceof DomainError
            ? `could not be asked: ${err.message}`
            : 'failed in a way this instance did not expect';
      this.health.failed(url, reason);
      return { kind: 'fault', url, reason };
    }
  }

  private async askPeer(
    peer: FederationPeer,
    address: string,
    prefix: 'agent' | 'test-agent' | undefined,
  ): Promise<Answer> {
    const answer = await exchange(this.dispatcher, `${peer.url}/v2/federation/agents/${address}`, {
      method: 'GET',
      headers: { authorization: await this.identity.authorization() },
      timeoutMs: this.policy.timeoutMs,
    });
    if (answer.status === 404) return { kind: 'absent', url: peer.url };
    if (answer.status !== 200) throw new ExchangeFault(`answered with status ${answer.status}`);
    if (this.peerRecordIssues(answer.body).length > 0) {
      throw new ExchangeFault('answered something that is not a federation record');
    }
    const { attestation } = answer.body as PeerRecord;
    let row: AlmanacRegistrationRow;
    try {
      // Checked as a registration sent here is: signed by the agent, not expired.
      row = await this.almanac.checkRegistration(attestation);
    } catch (err) {
      if (!(err instanceof BadRequestError)) throw err;
      throw new ExchangeFault(`answered a registration that does not check out (${err.message})`);
    }
    if (row.address !== address) throw new ExchangeFault('answered a record for another address');
    if (prefix !== undefined && row.prefix !== null && row.prefix !== prefix) {
      return { kind: 'absent', url: peer.url };
    }
    const endpoints = JSON.parse(row.endpoints) as Endpoint[];
    const entry: RemoteEntry = {
      address,
      active: true,
      type: typeOfRemote(endpoints),
      endpoints,
      protocols: JSON.parse(row.protocols) as string[],
      metadata:
        row.metadata === null ? null : (JSON.parse(row.metadata) as RemoteEntry['metadata']),
      expiresAt: row.expires_at,
      domainName: null,
      home: peer.url,
    };
    return { kind: 'found', url: peer.url, entry, signedAt: row.signed_at, fromPeer: true };
  }

  private async askUpstream(
    url: string,
    address: string,
    prefix: 'agent' | 'test-agent' | undefined,
  ): Promise<Answer> {
    const query = prefix === undefined ? '' : `?prefix=${prefix}`;
    const answer = await exchange(this.dispatcher, `${url}/v1/almanac/agents/${address}${query}`, {
      method: 'GET',
      headers: { [FEDERATED_LOOKUP_HEADER]: this.policy.publicUrl },
      timeoutMs: this.policy.timeoutMs,
    });
    if (answer.status === 404) return { kind: 'absent', url };
    if (answer.status !== 200) throw new ExchangeFault(`answered with status ${answer.status}`);
    if (this.almanacRecordIssues(answer.body).length > 0) {
      throw new ExchangeFault('answered something that is not an Almanac record');
    }
    const record = answer.body as AlmanacAgent;
    if (canonicalAgentAddress(record.address) !== address) {
      throw new ExchangeFault('answered a record for another address');
    }
    const expiresAt = Date.parse(record.expiry);
    if (Number.isNaN(expiresAt))
      throw new ExchangeFault('answered a record without a valid expiry');
    if (expiresAt <= this.clock.now()) return { kind: 'absent', url };
    const entry: RemoteEntry = {
      address,
      active: record.status === 'active',
      type: record.type,
      endpoints: record.endpoints,
      protocols: record.protocols,
      metadata: record.metadata as RemoteEntry['metadata'],
      expiresAt,
      domainName: record.domain_name,
      home: url,
    };
    return { kind: 'found', url, entry, signedAt: expiresAt, fromPeer: false };
  }

  // ---- Serving peers -----------------------------------------------------------------------

  /** 404 unless `caller` is the address of a configured peer. */
  private checkPeer(caller: string): void {
    if (!this.policy.peers.some((peer) => peer.address === caller)) {
      throw new NotFoundError(
        `${caller} is not a peer of this Agentry: its operator names peers in AGENTRY_PEERS`,
      );
    }
  }

  /**
   * A published agent's stored registration, as it signed it, for a peer; 404 otherwise. It is
   * answered from what this instance holds alone: a peer's look-up is never passed on.
   */
  async servePeer(caller: string, address: string): Promise<PeerRecord> {
    this.checkPeer(caller);
    const { federation, almanac } = this.store.repos;
    if ((await federation.publishedAt(address)) === undefined) {
      throw new NotFoundError(`Agent ${address} is not published here`);
    }
    const row = await almanac.findRegistration(address);
    if (!row || row.expires_at <= this.clock.now()) {
      throw new NotFoundError(`Agent ${address} has no live Almanac registration here`);
    }
    return {
      attestation: attestationOf(row),
      expires_at: isoTimestamp(row.expires_at),
      home: this.policy.publicUrl,
    };
  }

  /** The published agents' listings matching `text`, for a peer. */
  async searchForPeer(caller: string, text: string, limit: number): Promise<FederatedListing[]> {
    this.checkPeer(caller);
    const found = await this.search.searchAgents({
      search_text: text,
      sort: 'relevancy',
      direction: 'asc',
      cutoff: 'none',
      exact_match: false,
      semantic_search: false,
      rerank: true,
      offset: 0,
      limit: 100,
      source: 'federation',
    });
    const published = await this.store.repos.federation.publishedAmong(
      found.agents.map((agent) => agent.address),
    );
    return found.agents
      .filter((agent) => published.has(agent.address))
      .slice(0, limit)
      .map((agent) => ({
        address: agent.address,
        name: agent.name,
        description: agent.description,
        handle: agent.handle,
        home: this.policy.publicUrl,
      }));
  }

  /** The peers' published listings matching `text`, each marked with its home. */
  async searchPeers(text: string, limit: number): Promise<FederatedListing[]> {
    const pages = await Promise.all(
      this.policy.peers.map(async (peer) => {
        try {
          const answer = await exchange(this.dispatcher, `${peer.url}/v2/federation/search`, {
            method: 'POST',
            headers: { authorization: await this.identity.authorization() },
            body: { search_text: text, limit },
            timeoutMs: this.policy.timeoutMs,
          });
          if (answer.status !== 200)
            throw new ExchangeFault(`answered with status ${answer.status}`);
          if (this.searchResultIssues(answer.body).length > 0) {
            throw new ExchangeFault('answered something that is not a list of listings');
          }
          this.health.ok(peer.url, this.clock.now());
          // The home is the peer asked, whatever it says.
          return (answer.body as FederatedSearchResults).agents.map((agent) => ({
            ...agent,
            home: peer.url,
          }));
        } catch (err) {
          if (!(err instanceof ExchangeFault)) throw err;
          this.health.failed(peer.url, err.message);
          return [];
        }
      }),
    );
    return pages.flat().slice(0, limit);
  }

  // ---- Publishing outward ------------------------------------------------------------------

  async setting(principal: UserPrincipal, address: string): Promise<PublishingSetting> {
    await this.agents.get(principal.userId, address);
    return this.settingOf(address, await this.store.repos.federation.publishedAt(address));
  }

  /**
   * Publishes the caller's agent (its registration is pushed to the plain upstreams now and
   * each time it renews; peers may ask for it) or stops: peers are refused it at once.
   */
  async setPublished(
    principal: UserPrincipal,
    address: string,
    published: boolean,
  ): Promise<PublishingSetting> {
    await this.agents.get(principal.userId, address);
    const { federation } = this.store.repos;
    if (published) {
      await federation.publish(address, this.clock.now());
      await this.relay([address]);
    } else {
      await federation.unpublish(address);
    }
    return this.settingOf(address, await federation.publishedAt(address));
  }

  private settingOf(address: string, publishedAt: number | undefined): PublishingSetting {
    return {
      address,
      published: publishedAt !== undefined,
      published_at: publishedAt === undefined ? null : isoTimestamp(publishedAt),
      upstreams:
        publishedAt === undefined
          ? []
          : [...this.policy.peers.map((peer) => peer.url), ...this.policy.upstreams],
    };
  }

  /** A published agent renewed its registration: the plain upstreams get it as it was signed. */
  async heard(change: ChangeOf<'almanac.registered'>): Promise<void> {
    if (this.policy.upstreams.length === 0) return;
    const published = await this.store.repos.federation.publishedAmong([...change.addresses]);
    await this.relay([...published]);
  }

  /** Pushes the agents' live registrations, unchanged, to each plain upstream. */
  private async relay(addresses: string[]): Promise<void> {
    if (this.policy.upstreams.length === 0) return;
    const rows = await Promise.all(
      addresses.map((address) => this.store.repos.almanac.findRegistration(address)),
    );
    const now = this.clock.now();
    const attestations = rows
      .filter((row): row is AlmanacRegistrationRow => row !== undefined && row.expires_at > now)
      .map(attestationOf);
    await Promise.all(
      this.policy.upstreams.flatMap((url) =>
        attestations.map(async (attestation) => {
          try {
            const answer = await exchange(this.dispatcher, `${url}/v1/almanac/agents`, {
              method: 'POST',
              body: attestation,
              timeoutMs: this.policy.timeoutMs,
            });
            if (answer.status !== 200) {
              throw new ExchangeFault(
                `refused a registration relayed to it (status ${answer.status})`,
              );
            }
            this.health.ok(url, this.clock.now());
          } catch (err) {
            if (!(err instanceof ExchangeFault)) throw err;
            this.health.failed(url, err.message);
          }
        }),
      ),
    );
  }

  // ---- The operator ------------------------------------------------------------------------

  /** How many agents are published from this instance. */
  publishedCount(): Promise<number> {
    return this.store.repos.federation.countPublished();
  }

  /** An `Authorization` header signed with the instance key: this instance calling. */
  instanceAuthorization(): Promise<string> {
    return this.identity.authorization();
  }

  /** Who this instance is, as anyone may know it. */
  async identityView(): Promise<FederationIdentity> {
    return {
      address: await this.identity.address(),
      url: this.policy.publicUrl,
      published_agents: await this.publishedCount(),
    };
  }

  /**
   * This process's view of its peers and upstreams and the look-ups it answered from afar:
   * for a user of this Agentry, or the instance itself (its operator's `agentry status`, signed
   * with the instance key); anyone else is answered as if there were nothing here.
   */
  async statusFor(principal: Principal): Promise<FederationStatus> {
    if (principal.kind === 'agent' && principal.address !== (await this.identity.address())) {
      throw new NotFoundError(
        'The federation health is for the users of this Agentry and for the instance itself',
      );
    }
    return this.status();
  }

  async status(): Promise<FederationStatus> {
    const health = (url: string) => {
      const known = this.health.of(url);
      return {
        healthy: known.healthy,
        last_ok_at: known.lastOkAt === null ? null : isoTimestamp(known.lastOkAt),
        last_error: known.lastError,
      };
    };
    return {
      address: await this.identity.address(),
      url: this.policy.publicUrl,
      peers: this.policy.peers.map((peer) => ({ ...peer, ...health(peer.url) })),
      upstreams: this.policy.upstreams.map((url) => ({ url, ...health(url) })),
      published_agents: await this.publishedCount(),
      remote_lookups: this.records.recentLookups().map((lookup) => ({
        address: lookup.address,
        home: lookup.home,
        at: isoTimestamp(lookup.at),
        cached: lookup.cached,
      })),
    };
  }
}

function notFoundAfar(reason: string): NotFoundError {
  return new NotFoundError(`agent not found here, nor by the peers and upstreams asked: ${reason}`);
}

/** A stored registration as its agent signed it (the Almanac keeps every signed field). */
function attestationOf(row: AlmanacRegistrationRow): AgentRegistrationAttestation {
  return {
    agent_identifier: row.prefix === null ? row.address : `${row.prefix}://${row.address}`,
    protocols: JSON.parse(row.protocols) as string[],
    endpoints: JSON.parse(row.endpoints) as Endpoint[],
    metadata:
      row.metadata === null
        ? null
        : (JSON.parse(row.metadata) as AgentRegistrationAttestation['metadata']),
    timestamp: Math.floor(row.signed_at / 1000),
    signature: row.signature,
  };
}

/** An Agentry's mailbox or proxy endpoint makes the agent of that type, as it does locally. */
function typeOfRemote(endpoints: Endpoint[]): AlmanacAgentType {
  const paths = endpoints.map(({ url }) => {
    try {
      return new URL(url).pathname;
    } catch {
      return '';
    }
  });
  if (
    paths.some((path) => path.endsWith('/v2/agents/mailbox/submit') || path.endsWith('/v1/submit'))
  ) {
    return 'mailbox';
  }
  if (paths.some((path) => path.endsWith('/proxy/submit'))) return 'proxy';
  return 'uagent';
}
