import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { DEFAULT_POOL_SIZE, openSqliteConnection } from '../../src/store/database.js';
import { pgClientConfig } from '../lib/databases.js';
import { processCpuSeconds, processName } from '../lib/proc.js';
import type { Measure } from '../lib/report.js';
import { medianBy, medianRepeat, type Rounds } from '../lib/repeat.js';

/**
 * A table shaped like a mailbox message: a time-ordered key, a random version-4 UUID the
 * client looks messages up by, the target agent, the ~600-byte envelope text and two times,
 * with the UUID and (target, key) indexed.
 */
function messageTableDdl(idColumn: string, timeType: string): string[] {
  return [
    `create table bench_messages (
      id ${idColumn},
      uuid text not null unique,
      target text not null,
      envelope text not null,
      received_at ${timeType} not null,
      expires_at ${timeType} not null
    )`,
    'create index bench_messages_by_target on bench_messages (target, id)',
  ];
}

const INSERT_MESSAGE =
  'insert into bench_messages (uuid, target, envelope, received_at, expires_at) values ';

/** The service's default mailbox retention. */
const RETENTION_MS = 7 * 24 * 3600 * 1000;

export interface MessageSource {
  envelopes: string[];
  targets: string[];
}

function messageValues(source: MessageSource, i: number): [string, string, string, number, number] {
  const now = Date.now();
  return [
    randomUUID(),
    source.targets[i % source.targets.length]!,
    source.envelopes[i % source.envelopes.length]!,
    now,
    now + RETENTION_MS,
  ];
}

/**
 * Single-row commits per second into a fresh SQLite file opened with the service's own
 * settings (WAL, synchronous NORMAL). One connection, one thread: SQLite has one writer, and
 * in the service a commit holds the event loop while it runs or waits for the disk, so that
 * time is its cost per core.
 */
export function measureSqliteCeiling(source: MessageSource, rounds: Rounds): Measure {
  const dir = mkdtempSync(join(tmpdir(), 'agentry-bench-sqlite-'));
  const sqlite = openSqliteConnection(join(dir, 'ceiling.db'));
  try {
    for (const ddl of messageTableDdl('integer primary key', 'integer')) sqlite.exec(ddl);
    const insert = sqlite.prepare(`${INSERT_MESSAGE} (?, ?, ?, ?, ?)`);
    let i = 0;
    // Outside a transaction every statement commits on its own.
    const run = medianRepeat(rounds, () => insert.run(...messageValues(source, i++)));
    return {
      id: 'ceiling.storage',
      label: 'storage ceiling: 1-row commit, WAL + synchronous NORMAL',
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
    rmSync(dir, { recursive: true, force: true });
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
 * Single-row INSERT commits per second on PostgreSQL from as many concurrent clients as the
 * service's pool holds. Per core divides by the CPU time this process and PostgreSQL's
 * processes spent, which other load on the machine does not disturb; for a server on
 * another machine that cannot be read, and the commits per second are reported as they are.
 */
export async function measurePostgresCeiling(
  url: string,
  source: MessageSource,
  rounds: Rounds,
): Promise<Measure> {
  const pool = new pg.Pool({ ...pgClientConfig(url), max: DEFAULT_POOL_SIZE });
  try {
    const ddls = messageTableDdl('bigint generated always as identity primary key', 'bigint');
    for (const ddl of ddls) {
      await pool.query(ddl);
    }
    const connections = await Promise.all(
      Array.from({ length: DEFAULT_POOL_SIZE }, () => pool.connect()),
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

    const insert = `${INSERT_MESSAGE} ($1, $2, $3, $4, $5)`;
    let sent = 0;
    const insertUntil = async (until: number): Promise<void> => {
      await Promise.all(
        Array.from({ length: DEFAULT_POOL_SIZE }, async () => {
          while (performance.now() < until) {
            await pool.query(insert, messageValues(source, sent++));
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
      label: `storage ceiling: 1-row INSERT commit, ${DEFAULT_POOL_SIZE} clients`,
      store: 'postgres',
      value: median.rate,
      unit: local ? 'commits/s/core' : 'commits/s (remote server)',
      details: {
        commitsPerSecond: median.commitsPerSecond,
        roundRates: results.map((result) => result.rate),
        clients: DEFAULT_POOL_SIZE,
        postgresVersion: version[0]?.server_version,
      },
    };
  } finally {
    await pool.end();
  }
}
