import { randomUUID } from 'node:crypto';
import { Store, type DialectName } from '../../src/store/index.js';
import type { NewMessage } from '../../src/store/repositories/mailbox.js';
import { insertAgentWithMailbox, insertUser } from '../../test/kit/store.js';
import { freshDatabase } from './databases.js';
import { summarize } from './stats.js';

/** A migrated scratch store with one user and one agent's mailbox, for store-level benches. */
export interface MailboxBench {
  store: Store;
  /** The agent's address. */
  address: string;
  /** A new message of about 580 bytes for the mailbox, received now, kept a day. */
  message(): NewMessage;
  /** Closes the store and drops the database. */
  close(): Promise<void>;
}

export async function openMailboxBench(dialect: DialectName): Promise<MailboxBench> {
  const database = await freshDatabase(dialect);
  const store = Store.open(database.url);
  await store.migrate();
  const user = await insertUser(store);
  const address = `agent1${'q'.repeat(58)}`;
  await insertAgentWithMailbox(store, { address, user_id: user });
  const now = Date.now();
  const text = JSON.stringify({ pad: 'x'.repeat(560) });
  return {
    store,
    address,
    message: () => ({
      uuid: randomUUID(),
      address,
      envelope: text,
      size: text.length,
      received_at: now,
      expires_at: now + 86_400_000,
    }),
    close: async () => {
      await store.close();
      await database.drop();
    },
  };
}

/** The median of samples in milliseconds, in microseconds. */
export const medianMicros = (samples: number[]): number => summarize(samples).p50 * 1000;
