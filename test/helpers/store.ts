import { randomUUID } from 'node:crypto';
import { Store, type DialectName } from '../../src/store/index.js';
import { createTestDatabase } from './server.js';

export interface TestStore {
  store: Store;
  close(): Promise<void>;
}

/** A migrated store over a fresh database of the given dialect. */
export async function openTestStore(dialect: DialectName): Promise<TestStore> {
  const database = await createTestDatabase(dialect);
  const store = Store.open(database.url);
  await store.migrate();
  return {
    store,
    close: async () => {
      await store.close();
      await database.drop();
    },
  };
}

export async function insertUser(
  store: Store,
  name = `user-${randomUUID().slice(0, 8)}`,
): Promise<string> {
  const id = randomUUID();
  await store.repos.users.insert({ id, name, created_at: Date.now() });
  return id;
}
