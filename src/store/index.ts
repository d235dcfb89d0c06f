import { sql, type Kysely } from 'kysely';
import { openDatabase, type DatabaseOptions, type DialectName } from './database.js';
import { migrateToLatest, type MigrationOutcome } from './migrate.js';
import type { Database } from './schema.js';
import { ApiKeysRepository, UsersRepository } from './repositories/users.js';
import { ChallengesRepository, IdentitiesRepository } from './repositories/identity.js';
import { UsageRepository } from './repositories/usage.js';
import { AgentsRepository } from './repositories/agents.js';
import { counterChanges, MailboxesRepository } from './repositories/mailboxes.js';
import { AlmanacRepository } from './repositories/almanac.js';
import { InteractionsRepository } from './repositories/interactions.js';
import { MessagesRepository, type NewMessage } from './repositories/messages.js';

/** Every repository, bound to one executor (the pool, or one transaction). */
export interface Repositories {
  users: UsersRepository;
  apiKeys: ApiKeysRepository;
  challenges: ChallengesRepository;
  identities: IdentitiesRepository;
  usage: UsageRepository;
  agents: AgentsRepository;
  mailboxes: MailboxesRepository;
  almanac: AlmanacRepository;
  messages: MessagesRepository;
  interactions: InteractionsRepository;
}

function bindRepositories(db: Kysely<Database>, dialect: DialectName): Repositories {
  return {
    users: new UsersRepository(db, dialect),
    apiKeys: new ApiKeysRepository(db),
    challenges: new ChallengesRepository(db),
    identities: new IdentitiesRepository(db),
    usage: new UsageRepository(db, dialect),
    agents: new AgentsRepository(db),
    mailboxes: new MailboxesRepository(db),
    almanac: new AlmanacRepository(db),
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
    this.repos = bindRepositories(db, dialect);
  }

  static open(url: string, options: DatabaseOptions = {}): Store {
    const handle = openDatabase(url, options);
    return new Store(handle.db, handle.dialect, handle.close);
  }

  async migrate(): Promise<MigrationOutcome> {
    if (this.dialect === 'sqlite') return migrateToLatest(this.db);
    const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(
      this.db,
    );
    return migrateToLatest(this.db, rows[0]?.schema);
  }

  transaction<T>(work: (tx: Repositories) => Promise<T>): Promise<T> {
    return this.db.transaction().execute((trx) => work(bindRepositories(trx, this.dialect)));
  }

  /**
   * Stores messages and moves, by exactly the messages stored, their mailboxes' counters,
   * their owners' stored bytes and their owners' message usage in `period`; all of it or
   * nothing. A message whose uuid is taken (stored before, or earlier in the list) is
   * skipped. Returns the uuids stored now.
   */
  storeMessages(messages: NewMessage[], period: string): Promise<Set<string>> {
    if (this.dialect === 'postgres') return this.repos.messages.insertCounted(messages, period);
    return this.transaction(async (tx) => {
      const uuids = await tx.messages.insertMany(messages);
      const stored = messages.filter((message) => uuids.has(message.uuid));
      const moved = await tx.mailboxes.countMany(counterChanges(stored, 1));
      const ownerOf = new Map(moved.map((mailbox) => [mailbox.address, mailbox.user_id]));
      const perOwner = new Map<string, number>();
      for (const { address } of stored) {
        const owner = ownerOf.get(address);
        if (owner !== undefined) perOwner.set(owner, (perOwner.get(owner) ?? 0) + 1);
      }
      for (const [owner, count] of perOwner) {
        await tx.usage.add(owner, period, { num_messages: count });
      }
      return uuids;
    });
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
