import type { Kysely } from 'kysely';
import { dialectOf } from '../dialect.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/**
 * Active health (docs/activity.md, "Health"). `agent_probes` holds the agents whose owner asked
 * for probes: how often, when the next is due, the probe waiting for its answer (claimed by the
 * one process whose update set it), and what the probes found. `agent_probe_results` keeps each
 * probe's outcome for the rate search answers. Both go with the agent.
 */
export async function up(db: AnyDb): Promise<void> {
  const dialect = dialectOf(db);
  await db.schema
    .createTable('agent_probes')
    .addColumn('address', 'text', (c) =>
      c.primaryKey().references('agents.address').onDelete('cascade'),
    )
    .addColumn('interval_seconds', 'integer', (c) => c.notNull())
    .addColumn('next_probe_at', 'bigint', (c) => c.notNull())
    .addColumn('session_id', 'text')
    .addColumn('probe_msg_id', 'text')
    .addColumn('probe_sent_at', 'bigint')
    .addColumn('healthy', 'integer')
    .addColumn('failures', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_probe_at', 'bigint')
    .addColumn('last_answered_at', 'bigint')
    .addColumn('last_latency_ms', 'integer')
    .addColumn('last_failure', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('agent_probes_next_probe')
    .on('agent_probes')
    .columns(['next_probe_at'])
    .execute();
  await dialect
    .addIdentityColumn(db.schema.createTable('agent_probe_results'), 'id')
    .addColumn('address', 'text', (c) =>
      c.notNull().references('agents.address').onDelete('cascade'),
    )
    .addColumn('sent_at', 'bigint', (c) => c.notNull())
    .addColumn('answered', 'integer', (c) => c.notNull())
    .addColumn('latency_ms', 'integer')
    .execute();
  await db.schema
    .createIndex('agent_probe_results_address_sent')
    .on('agent_probe_results')
    .columns(['address', 'sent_at'])
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropTable('agent_probe_results').execute();
  await db.schema.dropTable('agent_probes').execute();
}
