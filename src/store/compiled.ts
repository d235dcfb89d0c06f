import type { CompiledQuery, Kysely, QueryResult } from 'kysely';
import type { Database } from './schema.js';

/** Shapes kept per set: a statement has one per row count it has met. */
const DEFAULT_LIMIT = 1000;

/**
 * Statements compiled once per shape. Kysely builds each query as a tree of frozen nodes and
 * compiles the tree to SQL on every call: on the mailbox's group commit that was a tenth of
 * the main thread, more than the statements' own parsing costs the database. A statement
 * whose text depends only on its shape (how many rows, which optional columns) is built and
 * compiled by Kysely the first time its shape is met; later calls bind their own values to
 * the same text and skip the builder.
 *
 * The caller lists the values in the order the compiled statement binds them. The first
 * compilation of each shape checks that the list matches the parameters Kysely produced, so
 * a builder whose order differs fails at once, on the first call, instead of ever binding a
 * value to the wrong column.
 *
 * One set per database: the SQL text is the dialect's.
 */
export class CompiledStatements {
  private readonly compiled = new Map<string, CompiledQuery>();
  private readonly limit: number;
  private readonly keepPrepared: (sql: string) => void;

  constructor(
    options: {
      /** Shapes kept at most; the oldest goes first. */
      limit?: number;
      /** Told the text of each statement run with `prepared` (the database's own). */
      keepPrepared?: (sql: string) => void;
    } = {},
  ) {
    this.limit = options.limit ?? DEFAULT_LIMIT;
    this.keepPrepared = options.keepPrepared ?? (() => {});
  }

  /**
   * Runs the statement of `shape` with `parameters`, compiled by `compile` when the shape is
   * new. `db` may be a transaction: the statement runs on its connection. A statement run
   * `prepared` is kept prepared by each connection of the database (on PostgreSQL, planned once
   * per connection instead of on every run): for the few statements, reads above all, whose
   * planning costs more than their running. Such a statement names the columns it reads, never
   * `*`: PostgreSQL refuses to run a kept plan whose result a migration changed ("cached plan
   * must not change result type"), as one run by a newer replica alongside older ones would.
   */
  async execute<R>(
    db: Kysely<Database>,
    shape: string,
    parameters: readonly unknown[],
    compile: () => CompiledQuery<R>,
    options: { prepared?: boolean } = {},
  ): Promise<QueryResult<R>> {
    const known = this.compiled.get(shape);
    if (known !== undefined) return db.executeQuery<R>({ ...known, parameters });
    const compiled = compile();
    assertSameParameters(shape, compiled.parameters, parameters);
    if (options.prepared) this.keepPrepared(compiled.sql);
    if (this.compiled.size >= this.limit) {
      this.compiled.delete(this.compiled.keys().next().value as string);
    }
    this.compiled.set(shape, compiled);
    return db.executeQuery<R>(compiled);
  }

  /** {@link execute}, for a statement that reads at most one row: that row, if any. */
  async first<R>(
    db: Kysely<Database>,
    shape: string,
    parameters: readonly unknown[],
    compile: () => CompiledQuery<R>,
    options: { prepared?: boolean } = {},
  ): Promise<R | undefined> {
    const { rows } = await this.execute(db, shape, parameters, compile, options);
    return rows[0];
  }

  /**
   * An INSERT of `rows`, built by `build`, on the statement of its shape (`name`, the rows'
   * count and columns), bound to the rows' own values column by column. Rows that set different
   * columns are built and run as usual. Answers what the statement returns.
   */
  async insert<R>(
    db: Kysely<Database>,
    name: string,
    rows: readonly object[],
    build: () => { compile(): CompiledQuery<R>; execute(): Promise<R[]> },
  ): Promise<R[]> {
    const shaped = insertedRows(rows);
    if (shaped === undefined) return build().execute();
    const compile = () => build().compile();
    return (await this.execute(db, `${name} ${shaped.shape}`, shaped.values, compile)).rows;
  }
}

/**
 * The shape and values of an INSERT of `rows`, in the order Kysely binds them (row by row,
 * column by column), when every row sets the same columns in the same order; undefined when
 * they differ (Kysely then writes defaults into the gaps, and the statement is built as usual).
 */
function insertedRows(rows: readonly object[]): { shape: string; values: unknown[] } | undefined {
  const columns = Object.keys(rows[0]!);
  const values: unknown[] = [];
  for (const row of rows) {
    const keys = Object.keys(row);
    if (keys.length !== columns.length) return undefined;
    for (const [index, key] of keys.entries()) {
      const value = (row as Record<string, unknown>)[key];
      // A value left undefined sets nothing.
      if (key !== columns[index] || value === undefined) return undefined;
      values.push(value);
    }
  }
  return { shape: `${rows.length} ${columns.join(',')}`, values };
}

function assertSameParameters(
  shape: string,
  compiled: readonly unknown[],
  given: readonly unknown[],
): void {
  const at = compiled.findIndex((value, index) => !Object.is(value, given[index]));
  if (compiled.length !== given.length || at !== -1) {
    throw new Error(
      `statement "${shape}": its values are listed out of the compiled order ` +
        `(${given.length} given, ${compiled.length} compiled; first difference at ${at})`,
    );
  }
}
