import type { Kysely, Selectable } from 'kysely';
import type { CompiledStatements } from '../compiled.js';
import { isUniqueViolation } from '../database.js';
import type { AgentEnrolmentsTable, Database } from '../schema.js';

export type EnrolmentRow = Selectable<AgentEnrolmentsTable>;

/** Addresses their owners provisioned: each may register itself under its owner. */
export class EnrolmentsRepository {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly statements: CompiledStatements,
  ) {}

  /**
   * Compiled once and kept prepared: every look-up of an address the Almanac does not hold
   * asks it (an enrolled agent resolves to its listing).
   */
  async find(address: string): Promise<EnrolmentRow | undefined> {
    return this.statements.first(
      this.db,
      'agent_enrolments.find',
      [address],
      () =>
        this.db
          .selectFrom('agent_enrolments')
          .select(['address', 'user_id', 'name', 'handle', 'created_at'])
          .where('address', '=', address)
          .compile(),
      { prepared: true },
    );
  }

  /**
   * Enrols the address to the user unless someone else holds it, or renames the user's own
   * enrolment; returns the owner after the attempt (the first of two racing claims wins), or
   * `handle-taken` when another enrolment holds the handle (its unique index decides a race).
   */
  async claim(row: EnrolmentRow): Promise<string | 'handle-taken'> {
    try {
      await this.db
        .insertInto('agent_enrolments')
        .values(row)
        .onConflict((oc) => oc.column('address').doNothing())
        .execute();
      const owner = await this.find(row.address);
      if (owner?.user_id === row.user_id) {
        await this.db
          .updateTable('agent_enrolments')
          .set({ name: row.name, handle: row.handle })
          .where('address', '=', row.address)
          .execute();
      }
      return owner!.user_id;
    } catch (err) {
      if (isUniqueViolation(err)) return 'handle-taken';
      throw err;
    }
  }

  /** Whether an enrolment holds the handle: of another address than `address`, when given. */
  async handleHeldByAnother(handle: string, address?: string): Promise<boolean> {
    let query = this.db
      .selectFrom('agent_enrolments')
      .select('address')
      .where('handle', '=', handle);
    if (address !== undefined) query = query.where('address', '<>', address);
    const row = await query.executeTakeFirst();
    return row !== undefined;
  }

  listForUser(userId: string, limit: number, offset: number): Promise<EnrolmentRow[]> {
    return this.db
      .selectFrom('agent_enrolments')
      .selectAll()
      .where('user_id', '=', userId)
      .orderBy('created_at')
      .orderBy('address')
      .limit(limit)
      .offset(offset)
      .execute();
  }

  async delete(address: string, userId: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('agent_enrolments')
      .where('address', '=', address)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }
}
