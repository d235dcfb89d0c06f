import type { Kysely } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** The longest handle (docs/enrolments.md). */
const MAX_HANDLE = 40;

/**
 * One enrolment per handle (docs/enrolments.md): a unique index, so that of two provisions of
 * one handle at the same instant the second fails (409) rather than both passing the check
 * before either wrote. Handles enrolled twice before it are settled first, the same way on
 * every database: the enrolment whose agent's listing carries the handle keeps it, else the
 * earliest enrolled (then the lowest address); each other one gets the handle with the end of
 * its address (`weather-bridge-k3x7qa-2fj8qz0x`), which its agent's listing, if it has one,
 * does not carry either.
 */
export async function up(db: AnyDb): Promise<void> {
  const shared = await db
    .selectFrom('agent_enrolments')
    .select('handle')
    .groupBy('handle')
    .having((eb) => eb.fn.countAll(), '>', 1)
    .execute();
  for (const { handle } of shared as { handle: string }[]) {
    const rows = (await db
      .selectFrom('agent_enrolments as e')
      .leftJoin('agents as a', (join) =>
        join.onRef('a.address', '=', 'e.address').on('a.handle', '=', handle),
      )
      .select(['e.address', 'e.created_at', 'a.address as listed'])
      .where('e.handle', '=', handle)
      .execute()) as { address: string; created_at: number | string; listed: string | null }[];
    rows.sort(
      (x, y) =>
        Number(y.listed !== null) - Number(x.listed !== null) ||
        Number(x.created_at) - Number(y.created_at) ||
        (x.address < y.address ? -1 : 1),
    );
    for (const { address } of rows.slice(1)) {
      const suffix = `-${address.slice(-8)}`;
      await db
        .updateTable('agent_enrolments')
        .set({ handle: `${handle.slice(0, MAX_HANDLE - suffix.length)}${suffix}` })
        .where('address', '=', address)
        .execute();
    }
  }
  await db.schema
    .createIndex('agent_enrolments_handle')
    .on('agent_enrolments')
    .column('handle')
    .unique()
    .execute();
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('agent_enrolments_handle').execute();
}
