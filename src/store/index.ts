import { sql, type Kysely } from 'kysely';
import { CompiledStatements } from './compiled.js';
import { openDatabase, type DatabaseOptions } from './database.js';
import { dialectNamed, type Dialect, type DialectName } from './dialect.js';
import { migrateToLatest, type MigrationOutcome } from './migrate.js';
import type { Database } from './schema.js';
import { ActivityRepository } from './repositories/activity.js';
import { AgentsRepository } from './repositories/agents.js';
import { AlmanacRepository } from './repositories/almanac.js';
import { ChatRepository } from './repositories/chat.js';
import { DeliveriesRepository } from './repositories/deliveries.js';
import { SearchRepository } from './repositories/search.js';
import { DomainsRepository } from './repositories/domains.js';
import { EnrolmentsRepository } from './repositories/enrolments.js';
import { A2aRepository } from './repositories/a2a.js';
import { FederationRepository } from './repositories/federation.js';
import { McpSessionsRepository } from './repositories/mcp-sessions.js';
import { ServersRepository } from './repositories/servers.js';
import { ProbesRepository } from './repositories/probes.js';
import { HostingRepository } from './repositories/hosting.js';
import { ChallengesRepository, IdentitiesRepository } from './repositories/identity.js';
import { InteractionsRepository } from './repositories/interactions.js';
import { ApiKeysRepository } from './repositories/keys.js';
import { MailboxRepository } from './repositories/mailbox.js';
import { MailroomRepository } from './repositories/mailroom.js';
import { ProxyRepository } from './repositories/proxy.js';
import { SessionsRepository } from './repositories/sessions.js';
import { StorageAssetsRepository } from './repositories/storage-assets.js';
import { TeamsRepository } from './repositories/teams.js';
import { UsageRepository } from './repositories/usage.js';
import { UsersRepository } from './repositories/users.js';
import { WebhooksRepository } from './repositories/webhooks.js';

/** Every repository, bound to one executor (the pool, or one transaction). */
export interface Repositories {
  users: UsersRepository;
  apiKeys: ApiKeysRepository;
  challenges: ChallengesRepository;
  identities: IdentitiesRepository;
  usage: UsageRepository;
  agents: AgentsRepository;
  mailbox: MailboxRepository;
  proxy: ProxyRepository;
  almanac: AlmanacRepository;
  interactions: InteractionsRepository;
  search: SearchRepository;
  domains: DomainsRepository;
  sessions: SessionsRepository;
  deliveries: DeliveriesRepository;
  activity: ActivityRepository;
  webhooks: WebhooksRepository;
  mailroom: MailroomRepository;
  storageAssets: StorageAssetsRepository;
  enrolments: EnrolmentsRepository;
  teams: TeamsRepository;
  hosting: HostingRepository;
  chat: ChatRepository;
  probes: ProbesRepository;
  mcpSessions: McpSessionsRepository;
  a2a: A2aRepository;
  federation: FederationRepository;
  servers: ServersRepository;
}

function bindRepositories(
  db: Kysely<Database>,
  dialect: Dialect,
  statements: CompiledStatements,
): Repositories {
  return {
    users: new UsersRepository(db, dialect),
    apiKeys: new ApiKeysRepository(db),
    challenges: new ChallengesRepository(db),
    identities: new IdentitiesRepository(db),
    usage: new UsageRepository(db),
    agents: new AgentsRepository(db),
    mailbox: new MailboxRepository(db, dialect.name, statements),
    proxy: new ProxyRepository(db, dialect.name),
    almanac: new AlmanacRepository(db, statements, dialect.name),
    interactions: new InteractionsRepository(db),
    search: new SearchRepository(db, dialect.name, statements),
    domains: new DomainsRepository(db),
    sessions: new SessionsRepository(db),
    deliveries: new DeliveriesRepository(db),
    activity: new ActivityRepository(db),
    webhooks: new WebhooksRepository(db, dialect.name),
    mailroom: new MailroomRepository(db),
    storageAssets: new StorageAssetsRepository(db),
    enrolments: new EnrolmentsRepository(db, statements),
    teams: new TeamsRepository(db),
    hosting: new HostingRepository(db, dialect.name),
    chat: new ChatRepository(db, statements),
    probes: new ProbesRepository(db),
    mcpSessions: new McpSessionsRepository(db),
    a2a: new A2aRepository(db, statements),
    federation: new FederationRepository(db),
    servers: new ServersRepository(db),
  };
}

/**
 * The only code that touches SQL. Services call repositories directly for single statements
 * and `transaction` when several must commit together.
 */
export class Store {
  readonly repos: Repositories;
  /** Shared by the repositories of every transaction: the texts are this database's. */
  private readonly statements: CompiledStatements;

  private constructor(
    readonly db: Kysely<Database>,
    private readonly sqlDialect: Dialect,
    private readonly closeDb: () => Promise<void>,
    keepPrepared: (sql: string) => void,
  ) {
    this.statements = new CompiledStatements({ keepPrepared });
    this.repos = bindRepositories(db, sqlDialect, this.statements);
  }

  static open(url: string, options: DatabaseOptions = {}): Store {
    const handle = openDatabase(url, options);
    return new Store(handle.db, dialectNamed(handle.dialect), handle.close, handle.keepPrepared);
  }

  get dialect(): DialectName {
    return this.sqlDialect.name;
  }

  async migrate(): Promise<MigrationOutcome> {
    return migrateToLatest(this.db, await this.sqlDialect.migrationSchema(this.db));
  }

  transaction<T>(work: (tx: Repositories) => Promise<T>): Promise<T> {
    return this.db
      .transaction()
      .execute((trx) => work(bindRepositories(trx, this.sqlDialect, this.statements)));
  }

  /** True when the store answers a trivial query (readiness). */
  async ping(): Promise<boolean> {
    try {
      await sql`select 1`.execute(this.db);
      return true;
    } catch {
      return false;
    }
  }

  close(): Promise<void> {
    return this.closeDb();
  }
}

export type { DialectName } from './dialect.js';
