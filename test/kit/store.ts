import { randomUUID } from 'node:crypto';
import { Store, type DialectName } from '../../src/store/index.js';
import type { AgentListing } from '../../src/store/repositories/agents.js';
import { createTestDatabase } from './databases.js';

export interface TestStore {
  store: Store;
  /** The database's URL, for a second store on it (another process, as it were). */
  url: string;
  close(): Promise<void>;
}

/** A migrated store over a fresh database of the given dialect. */
export async function openTestStore(dialect: DialectName): Promise<TestStore> {
  const database = await createTestDatabase(dialect);
  const store = Store.open(database.url);
  await store.migrate();
  return {
    store,
    url: database.url,
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

/** A registry entry with every optional field empty, as a registration that sets none. */
export function agentListing(
  fields: Pick<AgentListing, 'address' | 'user_id'> & Partial<AgentListing>,
): AgentListing {
  return {
    name: fields.address,
    handle: null,
    redirect_url: null,
    agent_type: 'uagent',
    profile: { description: '', readme: '', avatar_url: '', banner_url: '', starter_prompts: [] },
    endpoints: [],
    protocols: [],
    metadata: null,
    registered_at: 0,
    updated_at: 0,
    ...fields,
  };
}

/** Registers an agent with its mailbox straight in the store (no identity proof). */
export async function insertAgentWithMailbox(
  store: Store,
  fields: Parameters<typeof agentListing>[0],
): Promise<void> {
  const listing = agentListing(fields);
  await store.repos.agents.save(listing);
  await store.repos.mailbox.open({
    address: listing.address,
    user_id: listing.user_id,
    created_at: listing.registered_at,
  });
}

/**
 * The agent's status recorded as `status` at `statusAt`, the agent last seen at `lastSeenAt`
 * (then too unless given; null: never seen), nothing else known of it.
 */
export async function insertPresence(
  store: Store,
  address: string,
  status: string,
  statusAt: number,
  lastSeenAt: number | null = statusAt,
): Promise<void> {
  await store.db
    .insertInto('agent_presence')
    .values({
      address,
      last_seen_at: lastSeenAt,
      last_poll_at: null,
      forward_ok_at: null,
      forward_failed_at: null,
      forward_error: null,
      error_at: null,
      error: null,
      inactive_at: null,
      status,
      status_at: statusAt,
    })
    .execute();
}

/** A hosted agent (its listing stored already) of `ownerId`, in `state` since `at`, as wanted. */
export async function insertHostedAgent(
  store: Store,
  fields: { address: string; ownerId: string; state: string; at: number },
): Promise<void> {
  const { address, ownerId, state, at } = fields;
  await store.repos.hosting.insert({
    address,
    owner_id: ownerId,
    network: 'testnet',
    seed_ciphertext: 'x',
    code: null,
    code_digest: null,
    code_updated_at: null,
    revision: 0,
    desired_state: state,
    state,
    state_reason: null,
    state_changed_at: at,
    runner_id: null,
    lease_expires_at: null,
    restarts: 0,
    created_at: at,
  });
}
