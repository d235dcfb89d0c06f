import type { TeamDetailInfo, TeamInfo, TeamMemberInfo } from '../services/teams.js';
import { isoTimestamp } from '../wire/common.js';
import type { Team, TeamDetail, TeamMember } from '../wire/teams.js';

/** A team as the caller sees it in a list, with the caller's role. */
export function teamView(team: TeamInfo): Team {
  return {
    slug: team.slug,
    name: team.name,
    created_at: isoTimestamp(team.createdAt),
    role: team.role,
  };
}

export function teamMemberView(member: TeamMemberInfo): TeamMember {
  return { user: member.userName, role: member.role, added_at: isoTimestamp(member.addedAt) };
}

export function teamDetailView(team: TeamDetailInfo): TeamDetail {
  return { ...teamView(team), members: team.members.map(teamMemberView) };
}
