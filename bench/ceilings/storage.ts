import pg from 'pg';
import { defaults } from '../../src/config/index.js';
import { postgresConnection } from '../../src/store/database.js';
import { Store } from '../../src/store/index.js';
import { insertMessagesQuery, openSqliteConnection, sqlitePath } from '../../src/store/probes.js';
import { insertAgentWithMailbox } from '../../test/kit/store.js';
import type { BenchDatabase } from '../lib/databases.js';
import { messageRow, type MessageSource } from '../lib/seed.js';
import { processCpuSeconds, processName } from '../lib/proc.js';
import type { Measure } from '../lib/report.js';
import { medianBy, medianRepeat, type Rounds } from '../lib/repeat.js';

/** The service's INSERT of one message, as SQL text and the parameters of message `i`. */
interface MessageInsert {
  sql: string;
  parameters(i: number): unknown[];
}

/**
 * Migrates the database at `url` to the service's schema, registers the targets' mailboxes
 * (the messages table refers to them) and compiles the statement the service stores a
 * message with, so the ceiling writes the real table, indexes and constraints.
 */
async function prepareMessageInsert(url: string, source: MessageSource): Promise<MessageInsert> {
  const store = Store.open(url, { poolSize: 1 });
  try {
    await store.migrate();
    const now = Date.now();
    const owner = 'bench-ceiling';
    await store.repos.users.insert({ id: owner, name: owner, created_at: now });
    for (const address of source.targets) {
      await insertAgentWithMailbox(store, {
        address,
        user_id: owner,
        name: owner,
        agent_type: 'mailbox',
        registered_at: now,
        updated_at: now,
      });
    }
    const sample = messageRow(source, 0);
    const compiled = insertMessagesQuery(store.db, [sample]).compile();
    // The parameters follow the row's fields; binding them straight spares Kysely per call.
    if (JSON.stringify(compiled.parameters) !== JSON.stringify(Object.values(sample))) {
      throw new Error('the message INSERT binds its parameters in an unexpected order');
    }
    return { sql: compiled.sql, parameters: (i) => Object.values(messageRow(source, i)) };
  } finally {
    await store.close();
  }
}

/**
 * Single-row commits per second of the service's message INSERT into a SQLite file with the
 * service's schema, on a connection with the service's settings (WAL, synchronous NORMAL).
 * One connection, one thread: SQLite has one writer, and a commit holds the thread while it
 * runs or waits for the disk, so that time is its cost per core. Checkpoints run on the
 * committing thread, as SQLite does by default (the service moves them to a thread of their
 * own), so their cost is in the rate.
 */
export async function measureSqliteCeiling(
  database: BenchDatabase,
  source: MessageSource,
  rounds: Rounds,
): Promise<Measure> {
  const { sql, parameters } = await prepareMessageInsert(database.url, source);
  const sqlite = openSqliteConnection(sqlitePath(database.url));
  try {
    const insert = sqlite.prepare(sql);
    let i = 0;
    // Outside a transaction every statement commits on its own.
    const run = medianRepeat(rounds, () => insert.get(...parameters(i++)));
    return {
      id: 'ceiling.storage',
      label: 'storage ceiling: 1-message commit, WAL + synchronous NORMAL',
      store: 'sqlite',
      value: run.perCore,
      unit: 'commits/s/core',
      details: {
        commits: run.calls,
        preempted: run.preempted,
        roundRates: run.roundRates,
        sqliteVersion: sqlite.prepare('select sqlite_version()').pluck().get(),
      },
    };
  } finally {
    sqlite.close();
  }
}

/**
 * CPU seconds used so far by this process and by the PostgreSQL processes doing its work:
 * its connections' backends and the server's background writers. Undefined when those
 * processes are not on this machine.
 */
function cpuOfInserts(pgPids: number[]): number | undefined {
  try {
    if (!pgPids.every((pid) => processName(pid) === 'postgres')) return undefined;
    return pgPids.reduce(
      (sum, pid) => sum + processCpuSeconds(pid),
      processCpuSeconds(process.pid),
    );
  } catch {
    return undefined;
  }
}

/**
 * Single-row commits per second of the service's message INSERT on PostgreSQL, into the
 * service's schema, from as many concurrent clients as the service's pool holds. Per core
 * divides by the CPU time this process and PostgreSQL's processes spent, which other load on
 * the machine does not disturb; for a server on another machine that cannot be read, and the
 * commits per second are reported as they are.
 */
export async function measurePostgresCeiling(
  database: BenchDatabase,
  source: MessageSource,
  rounds: Rounds,
): Promise<Measure> {
  const { sql, parameters } = await prepareMessageInsert(database.url, source);
  const pool = new pg.Pool({ ...postgresConnection(database.url), max: defaults.databasePoolSize });
  try {
    const connections = await Promise.all(
      Array.from({ length: defaults.databasePoolSize }, () => pool.connect()),
    );
    const backendPids = await Promise.all(
      connections.map(async (client) => {
        const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
        return rows[0]!.pid;
      }),
    );
    for (const client of connections) client.release();
    const { rows: background } = await pool.query<{ pid: number }>(
      "select pid from pg_stat_activity where backend_type in ('walwriter', 'checkpointer', 'background writer')",
    );
    const pgPids = [...backendPids, ...background.map((row) => row.pid)];

    let sent = 0;
    const insertUntil = async (until: number): Promise<void> => {
      await Promise.all(
        Array.from({ length: defaults.databasePoolSize }, async () => {
          while (performance.now() < until) {
            await pool.query(sql, parameters(sent++));
          }
        }),
      );
    };
    const round = async (): Promise<{ rate: number; commitsPerSecond: number }> => {
      const sentBefore = sent;
      const cpuBefore = cpuOfInserts(pgPids);
      const start = performance.now();
      await insertUntil(start + rounds.seconds * 1000);
      const elapsed = (performance.now() - start) / 1000;
      const cpuAfter = cpuOfInserts(pgPids);
      const commits = sent - sentBefore;
      return {
        rate:
          cpuBefore === undefined || cpuAfter === undefined
            ? commits / elapsed
            : commits / (cpuAfter - cpuBefore),
        commitsPerSecond: commits / elapsed,
      };
    };
    await insertUntil(performance.now() + 500);
    const results = [];
    for (let i = 0; i < rounds.count; i++) results.push(await round());
    const median = medianBy(results, (result) => result.rate);
    const local = cpuOfInserts(pgPids) !== undefined;
    const { rows: version } = await pool.query<{ server_version: string }>('show server_version');
    return {
      id: 'ceiling.storage',
      label: `storage ceiling: 1-message commit, ${defaults.databasePoolSize} clients`,
      store: 'postgres',
      value: median.rate,
      unit: local ? 'commits/s/core' : 'commits/s (remote server)',
      details: {
        commitsPerSecond: median.commitsPerSecond,
        roundRates: results.map((result) => result.rate),
        clients: defaults.databasePoolSize,
        postgresVersion: version[0]?.server_version,
      },
    };
  } finally {
    await pool.end();
  }
}
