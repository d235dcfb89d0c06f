import type { Kysely, Selectable } from 'kysely';
import { isUniqueViolation } from '../database.js';
import type { Database, TeamMembersTable, TeamsTable } from '../schema.js';

export type TeamRow = Selectable<TeamsTable>;
export type TeamMemberRow = Selectable<TeamMembersTable>;

/** A team as one of its members sees it in a list: with the member's role. */
export type MembershipRow = TeamRow & { role: string };

/** A member, with the user's name. */
export type MemberRow = TeamMemberRow & { user_name: string };

/**
 * Teams and their members. A team's owner account is a row of `users` (written first, by the
 * caller's transaction); deleting that row deletes the team and its memberships.
 */
export class TeamsRepository {
  constructor(private readonly db: Kysely<Database>) {}

  /** Inserts the team; 'slug-taken' when another has its slug. */
  async insert(team: TeamRow): Promise<'inserted' | 'slug-taken'> {
    try {
      await this.db.insertInto('teams').values(team).execute();
      return 'inserted';
    } catch (err) {
      if (isUniqueViolation(err)) return 'slug-taken';
      throw err;
    }
  }

  findBySlug(slug: string): Promise<TeamRow | undefined> {
    return this.db.selectFrom('teams').selectAll().where('slug', '=', slug).executeTakeFirst();
  }

  findById(id: string): Promise<TeamRow | undefined> {
    return this.db.selectFrom('teams').selectAll().where('id', '=', id).executeTakeFirst();
  }

  /** The team of this slug with the user's role in it, if the user is a member. */
  membership(slug: string, userId: string): Promise<MembershipRow | undefined> {
    return this.db
      .selectFrom('teams')
      .innerJoin('team_members', 'team_members.team_id', 'teams.id')
      .select(['teams.id', 'teams.slug', 'teams.name', 'teams.created_at', 'team_members.role'])
      .where('teams.slug', '=', slug)
      .where('team_members.user_id', '=', userId)
      .executeTakeFirst();
  }

  /** Whether the user is a member of the team (by the team's id). */
  async isMember(teamId: string, userId: string): Promise<boolean> {
    const row = await this.db
      .selectFrom('team_members')
      .select('user_id')
      .where('team_id', '=', teamId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return row !== undefined;
  }

  /** The teams a user belongs to, by slug. */
  listForUser(userId: string): Promise<MembershipRow[]> {
    return this.db
      .selectFrom('teams')
      .innerJoin('team_members', 'team_members.team_id', 'teams.id')
      .select(['teams.id', 'teams.slug', 'teams.name', 'teams.created_at', 'team_members.role'])
      .where('team_members.user_id', '=', userId)
      .orderBy('teams.slug')
      .execute();
  }

  /** Every team, by slug (the operator's view). */
  list(): Promise<TeamRow[]> {
    return this.db.selectFrom('teams').selectAll().orderBy('slug').execute();
  }

  members(teamId: string): Promise<MemberRow[]> {
    return this.db
      .selectFrom('team_members')
      .innerJoin('users', 'users.id', 'team_members.user_id')
      .selectAll('team_members')
      .select('users.name as user_name')
      .where('team_members.team_id', '=', teamId)
      .orderBy('team_members.added_at')
      .orderBy('users.name')
      .execute();
  }

  async countMembers(teamId: string): Promise<number> {
    const row = await this.db
      .selectFrom('team_members')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('team_id', '=', teamId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async countOwners(teamId: string): Promise<number> {
    const row = await this.db
      .selectFrom('team_members')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('team_id', '=', teamId)
      .where('role', '=', 'owner')
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  /** Adds a member; 'member-already' when the user is one. */
  async addMember(row: TeamMemberRow): Promise<'added' | 'member-already'> {
    try {
      await this.db.insertInto('team_members').values(row).execute();
      return 'added';
    } catch (err) {
      // The primary key is the pair: SQLite names its violation apart from a unique index's.
      const code = (err as { code?: unknown } | null)?.code;
      if (isUniqueViolation(err) || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') {
        return 'member-already';
      }
      throw err;
    }
  }

  async setRole(teamId: string, userId: string, role: string): Promise<boolean> {
    const result = await this.db
      .updateTable('team_members')
      .set({ role })
      .where('team_id', '=', teamId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return Number(result.numUpdatedRows) > 0;
  }

  async removeMember(teamId: string, userId: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('team_members')
      .where('team_id', '=', teamId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }

  /** The agents (proven identities) and names a team still owns, which block its deletion. */
  async holdings(teamId: string): Promise<{ agents: number; names: number }> {
    const agents = await this.db
      .selectFrom('identities')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('user_id', '=', teamId)
      .executeTakeFirstOrThrow();
    const names = await this.db
      .selectFrom('domains')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('user_id', '=', teamId)
      .executeTakeFirstOrThrow();
    return { agents: Number(agents.n), names: Number(names.n) };
  }

  /** Deletes the team's owner account, and with it the team, its members, keys and the rest. */
  async delete(teamId: string): Promise<boolean> {
    const result = await this.db.deleteFrom('users').where('id', '=', teamId).executeTakeFirst();
    return Number(result.numDeletedRows) > 0;
  }
}
