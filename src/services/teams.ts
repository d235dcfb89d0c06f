import { randomUUID } from 'node:crypto';
import { ConflictError, ForbiddenError, NotFoundError } from '../errors.js';
import type { ChangeFeed } from '../infra/change-feed.js';
import type { Clock } from '../infra/clock.js';
import type { Store } from '../store/index.js';
import type { MemberRow, MembershipRow, TeamRow } from '../store/repositories/teams.js';
import { TEAM_SLUG_PATTERN, type TeamRole } from '../wire/teams.js';

const SLUG = new RegExp(TEAM_SLUG_PATTERN);

/** The most members a team has, and the most teams a user belongs to. */
export const MAX_TEAM_MEMBERS = 500;
export const MAX_TEAMS_PER_USER = 100;

/** The `users` name of a team's owner account: no user can take it (a colon is not allowed). */
export function teamAccountName(slug: string): string {
  return `team:${slug}`;
}

export interface TeamInfo {
  id: string;
  slug: string;
  name: string;
  createdAt: number;
  /** The caller's role. */
  role: TeamRole;
}

export interface TeamMemberInfo {
  userId: string;
  userName: string;
  role: TeamRole;
  addedAt: number;
}

export type TeamDetailInfo = TeamInfo & { members: TeamMemberInfo[] };

/**
 * Who manages a team: a user's id (their role in the team decides), or null for the operator
 * (the command line), who may do what an owner does.
 */
export type TeamActor = string | null;

function teamInfo(row: MembershipRow): TeamInfo {
  return {
    id: row.id,
    slug: row.slug,
    name: row.name,
    createdAt: row.created_at,
    role: row.role as TeamRole,
  };
}

function memberInfo(row: MemberRow): TeamMemberInfo {
  return {
    userId: row.user_id,
    userName: row.user_name,
    role: row.role as TeamRole,
    addedAt: row.added_at,
  };
}

/**
 * Teams: owners like users (each has an account in `users`, which owns its agents, names, keys
 * and quotas), whose members act in its name with `x-team: <slug>`. Owners manage the members;
 * a team always keeps at least one owner. Every rule takes the acting user's own id (never the
 * team's), and a team's own key manages no team.
 */
export class TeamsService {
  constructor(
    private readonly store: Store,
    private readonly clock: Clock,
    private readonly feed: ChangeFeed,
  ) {}

  /**
   * The team a user may act for with `x-team`: its owner id. Checked on every request, so that
   * a member removed loses access at once.
   */
  async actAs(userId: string, slug: string): Promise<string> {
    // A value no slug can be is refused without a look-up, and quoted only in part.
    const membership = SLUG.test(slug)
      ? await this.store.repos.teams.membership(slug, userId)
      : undefined;
    if (!membership) {
      throw new ForbiddenError(
        `Not a member of a team "${slug.slice(0, 40)}": ask one of its owners to add you (GET /v2/teams lists your teams), or leave out the x-team header`,
      );
    }
    return membership.id;
  }

  /**
   * The owner a call names by a team's slug in its path (the Hosting API's `/teams/{slug}/…`
   * calls): the team, for a member of it (whatever `x-team` says) or for the team's own key.
   * Anyone else is answered 404, as for a team that does not exist.
   */
  async ownerNamedInPath(actorId: string, ownerId: string, slug: string): Promise<string> {
    if (SLUG.test(slug)) {
      // A member, the usual caller, is found in one look-up; the team's own key in a second.
      const membership = await this.store.repos.teams.membership(slug, actorId);
      if (membership) return membership.id;
      const team = await this.store.repos.teams.findBySlug(slug);
      if (team?.id === ownerId) return team.id;
    }
    throw new NotFoundError(`No team "${slug.slice(0, 40)}" among yours`);
  }

  async createTeam(actorId: string, slug: string, name?: string): Promise<TeamDetailInfo> {
    await this.requireUser(actorId);
    const now = this.clock.now();
    const id = randomUUID();
    const team: TeamRow = { id, slug, name: name ?? slug, created_at: now };
    await this.store.transaction(async (tx) => {
      if ((await tx.teams.listForUser(actorId)).length >= MAX_TEAMS_PER_USER) {
        throw new ConflictError(
          `A user belongs to at most ${MAX_TEAMS_PER_USER} teams; leave or delete one first`,
        );
      }
      const account = { id, name: teamAccountName(slug), created_at: now };
      const taken = () => new ConflictError(`A team "${slug}" already exists; choose another slug`);
      if ((await tx.users.insert(account)) === 'name-taken') throw taken();
      if ((await tx.teams.insert(team)) === 'slug-taken') throw taken();
      await tx.teams.addMember({ team_id: id, user_id: actorId, role: 'owner', added_at: now });
    });
    return this.getTeam(actorId, slug);
  }

  async listTeams(actorId: string): Promise<TeamInfo[]> {
    await this.requireUser(actorId);
    return (await this.store.repos.teams.listForUser(actorId)).map(teamInfo);
  }

  /** A team with its members, for a member; another user is answered as for no team at all. */
  async getTeam(actorId: TeamActor, slug: string): Promise<TeamDetailInfo> {
    const team = await this.memberOf(actorId, slug);
    const members = await this.store.repos.teams.members(team.id);
    return { ...team, members: members.map(memberInfo) };
  }

  /** Adds an existing user by name; owners only. */
  async addMember(
    actorId: TeamActor,
    slug: string,
    userName: string,
    role: TeamRole,
  ): Promise<TeamMemberInfo> {
    const team = await this.ownerOf(actorId, slug);
    const user = await this.store.repos.users.findByName(userName);
    if (!user || (await this.store.repos.teams.findById(user.id))) {
      throw new NotFoundError(
        `No user named "${userName}"; users are made with "agentry users create"`,
      );
    }
    const now = this.clock.now();
    await this.store.transaction(async (tx) => {
      await tx.users.lock(team.id);
      if ((await tx.teams.countMembers(team.id)) >= MAX_TEAM_MEMBERS) {
        throw new ConflictError(`A team has at most ${MAX_TEAM_MEMBERS} members`);
      }
      if ((await tx.teams.listForUser(user.id)).length >= MAX_TEAMS_PER_USER) {
        throw new ConflictError(`"${userName}" belongs to ${MAX_TEAMS_PER_USER} teams already`);
      }
      const added = await tx.teams.addMember({
        team_id: team.id,
        user_id: user.id,
        role,
        added_at: now,
      });
      if (added === 'member-already') {
        throw new ConflictError(
          `"${userName}" is a member of "${slug}" already; change the role with PUT /v2/teams/${slug}/members/${userName}`,
        );
      }
    });
    return { userId: user.id, userName: user.name, role, addedAt: now };
  }

  /** Changes a member's role; owners only, and the last owner stays one. */
  async setRole(
    actorId: TeamActor,
    slug: string,
    userName: string,
    role: TeamRole,
  ): Promise<TeamMemberInfo> {
    const team = await this.ownerOf(actorId, slug);
    return this.store.transaction(async (tx) => {
      await tx.users.lock(team.id);
      const member = (await tx.teams.members(team.id)).find((m) => m.user_name === userName);
      if (!member) throw new NotFoundError(`"${userName}" is not a member of "${slug}"`);
      if (member.role === 'owner' && role !== 'owner') await this.keepAnOwner(tx, team.id);
      await tx.teams.setRole(team.id, member.user_id, role);
      return { ...memberInfo(member), role };
    });
  }

  /**
   * Removes a member: an owner removes anyone, a member only themself (leaving). The last owner
   * cannot go; delete the team instead. The member's next request in the team's name is refused.
   */
  async removeMember(actorId: TeamActor, slug: string, userName: string): Promise<void> {
    const team = await this.memberOf(actorId, slug);
    const removed = await this.store.transaction(async (tx) => {
      await tx.users.lock(team.id);
      const member = (await tx.teams.members(team.id)).find((m) => m.user_name === userName);
      if (member?.user_id !== actorId && team.role !== 'owner') {
        throw new ForbiddenError(`Only an owner of "${slug}" removes other members`);
      }
      if (!member) throw new NotFoundError(`"${userName}" is not a member of "${slug}"`);
      if (member.role === 'owner') await this.keepAnOwner(tx, team.id);
      await tx.teams.removeMember(team.id, member.user_id);
      // The keys the member made for the team leave with them (docs/teams.md).
      const keys = await tx.apiKeys.revokeMadeBy(team.id, member.user_id, this.clock.now());
      return { userId: member.user_id, keys };
    });
    // What the member opened in the team's name ends with the membership.
    void this.feed.publish([
      { kind: 'member.removed', teamId: team.id, userId: removed.userId },
      ...removed.keys.map((keyId) => ({ kind: 'key.revoked' as const, keyId })),
    ]);
  }

  /**
   * Deletes a team; owners only, and only once it owns no agent and no name (delete them, or
   * register them again under another owner, first), so that nothing running is orphaned. Its
   * keys, webhooks, quotas and usage go with it.
   */
  async deleteTeam(actorId: TeamActor, slug: string): Promise<void> {
    const team = await this.ownerOf(actorId, slug);
    await this.store.transaction(async (tx) => {
      await tx.users.lock(team.id);
      const { agents, names } = await tx.teams.holdings(team.id);
      if (agents > 0 || names > 0) {
        throw new ConflictError(
          `Team "${slug}" still owns ${agents} agent(s) and ${names} name(s); delete them (acting as the team with x-team: ${slug}) before the team`,
        );
      }
      await tx.teams.delete(team.id);
    });
    void this.feed.publish([{ kind: 'team.deleted', teamId: team.id }]);
  }

  /** Every team and its members (the operator's view). */
  async listAll(): Promise<(TeamRow & { members: TeamMemberInfo[] })[]> {
    const teams = await this.store.repos.teams.list();
    return Promise.all(
      teams.map(async (team) => ({
        ...team,
        members: (await this.store.repos.teams.members(team.id)).map(memberInfo),
      })),
    );
  }

  private async keepAnOwner(
    tx: Parameters<Parameters<Store['transaction']>[0]>[0],
    teamId: string,
  ): Promise<void> {
    if ((await tx.teams.countOwners(teamId)) <= 1) {
      throw new ConflictError(
        'A team keeps at least one owner: make another member an owner first, or delete the team',
      );
    }
  }

  private async requireUser(actorId: string): Promise<void> {
    if (await this.store.repos.teams.findById(actorId)) {
      throw new ForbiddenError("A team's own API key manages no team; use a member's own key");
    }
  }

  private async memberOf(actorId: TeamActor, slug: string): Promise<TeamInfo> {
    if (actorId === null) {
      const team = await this.store.repos.teams.findBySlug(slug);
      if (!team) throw new NotFoundError(`No team "${slug}"`);
      return teamInfo({ ...team, role: 'owner' });
    }
    await this.requireUser(actorId);
    const membership = await this.store.repos.teams.membership(slug, actorId);
    if (!membership) throw new NotFoundError(`No team "${slug}" among yours`);
    return teamInfo(membership);
  }

  private async ownerOf(actorId: TeamActor, slug: string): Promise<TeamInfo> {
    const team = await this.memberOf(actorId, slug);
    if (team.role !== 'owner') {
      throw new ForbiddenError(`Only an owner of "${slug}" may do this; you are a member`);
    }
    return team;
  }
}
