import { availableParallelism } from 'node:os';
import type { DialectName } from '../../src/store/index.js';
import { freshDatabase } from '../lib/databases.js';
import type { EnvelopeBatch } from '../lib/envelopes.js';
import type { LoadProfile } from '../lib/load.js';
import type { Measure } from '../lib/report.js';
import type { Rounds } from '../lib/repeat.js';
import { measureCryptoCeiling } from './crypto.js';
import { measureHttpCeiling } from './http.js';
import { measurePostgresCeiling, measureSqliteCeiling } from './storage.js';

/** How the crypto and storage ceilings are timed: the median of five one-second rounds. */
const ROUNDS: Rounds = { count: 5, seconds: 1 };

/** What one core does of each part of a mailbox submit, and the composed ceiling per store. */
export interface Ceilings {
  http: Measure;
  crypto: Measure;
  storage: Partial<Record<DialectName, Measure>>;
  /** cores / (1/HTTP + 1/crypto + 1/storage): the submits/s the parts allow, per store. */
  submit: Partial<Record<DialectName, Measure>>;
}

/**
 * The most submits per second the machine could serve if all cores did nothing but pay,
 * for each request, one HTTP exchange, one signature check and one durable insert.
 */
export function composedSubmitCeiling(
  cores: number,
  http: Measure,
  crypto: Measure,
  storage: Measure,
): Measure {
  return {
    id: 'ceiling.submit',
    label: `submit ceiling: ${cores} cores / (1/HTTP + 1/crypto + 1/storage)`,
    store: storage.store,
    value: cores / (1 / http.value + 1 / crypto.value + 1 / storage.value),
    unit: 'req/s',
    details: {
      cores,
      httpPerCore: http.value,
      cryptoPerCore: crypto.value,
      storagePerCore: storage.value,
    },
  };
}

/** Measures every ceiling in this run, on this machine, for the given stores. */
export async function measureCeilings(
  dialects: DialectName[],
  envelopes: EnvelopeBatch,
  targets: string[],
  profile: LoadProfile,
): Promise<Ceilings> {
  const http = await measureHttpCeiling(envelopes.bodies[0]!, profile);
  const crypto = measureCryptoCeiling(envelopes.envelopes, ROUNDS);
  const cores = availableParallelism();
  const source = { envelopes: envelopes.bodies, targets };
  const ceilings: Ceilings = { http, crypto, storage: {}, submit: {} };
  for (const dialect of dialects) {
    const database = await freshDatabase(dialect);
    let storage: Measure;
    try {
      storage =
        dialect === 'sqlite'
          ? await measureSqliteCeiling(database, source, ROUNDS)
          : await measurePostgresCeiling(database, source, ROUNDS);
    } finally {
      await database.drop();
    }
    ceilings.storage[dialect] = storage;
    ceilings.submit[dialect] = composedSubmitCeiling(cores, http, crypto, storage);
  }
  return ceilings;
}
