import { describe } from 'node:test';
import type { DialectName } from '../../src/store/index.js';
import { testPgUrl } from './databases.js';

/** Dialects to run the store suites on: always SQLite, PostgreSQL when a test server is set. */
export const dialects: DialectName[] = testPgUrl ? ['sqlite', 'postgres'] : ['sqlite'];

/**
 * Declares the suite `name (dialect)` once for each of {@link dialects}: `suite` declares its
 * hooks and tests for that dialect.
 */
export function describeOnEachDialect(name: string, suite: (dialect: DialectName) => void): void {
  for (const dialect of dialects) {
    describe(`${name} (${dialect})`, () => suite(dialect));
  }
}
