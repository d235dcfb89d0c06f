import { sql, type Kysely } from 'kysely';
import { openDatabase, type DatabaseOptions, type DialectName } from './database.js';
import { migrateToLatest, type MigrationOutcome } from './migrate.js';
import type { Database } from './schema.js';
import { ApiKeysRepository, UsersRepository } from './repositories/users.js';
import { ChallengesRepository, IdentitiesRepository } from './repositories/identity.js';
import { UsageRepository } from './repositories/usage.js';
import { AgentDirectoryRepository } from './repositories/agent-directory.js';
import { InteractionsRepository } from './repositories/interactions.js';
import { MailboxesRepository } from './repositories/mailboxes.js';
import { MessagesRepository } from './repositories/messages.js';

/** Every repository, bound to one executor (the pool, or one transaction). */
export interface Repositories {
  users: UsersRepository;
  apiKeys: ApiKeysRepository;
  challenges: ChallengesRepository;
  identities: IdentitiesRepository;
  usage: UsageRepository;
  agentDirectory: AgentDirectoryRepository;
  mailboxes: MailboxesRepository;
  messages: MessagesRepository;
  interactions: InteractionsRepository;
}

function bindRepositories(db: Kysely<Database>): Repositories {
  return {
    users: new UsersRepository(db),
    apiKeys: new ApiKeysRepository(db),
    challenges: new ChallengesRepository(db),
    identities: new IdentitiesRepository(db),
    usage: new UsageRepository(db),
    agentDirectory: new AgentDirectoryRepository(db),
    mailboxes: new MailboxesRepository(db),
    messages: new MessagesRepository(db),
    interactions: new InteractionsRepository(db),
  };
}

/**
 * The only code that touches SQL. Services call repositories directly for single statements
 * and `transaction` when several must commit together.
 */
export class Store {
  readonly repos: Repositories;

  private constructor(
    readonly db: Kysely<Database>,
    readonly dialect: DialectName,
    private readonly closeDb: () => Promise<void>,
  ) {
    this.repos = bindRepositories(db);
  }

  static open(url: string, options: DatabaseOptions = {}): Store {
    const handle = openDatabase(url, options);
    return new Store(handle.db, handle.dialect, handle.close);
  }

  migrate(): Promise<MigrationOutcome> {
    return migrateToLatest(this.db);
  }

  transaction<T>(work: (tx: Repositories) => Promise<T>): Promise<T> {
    return this.db.transaction().execute((trx) => work(bindRepositories(trx)));
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

export type { DialectName } from './database.js';
