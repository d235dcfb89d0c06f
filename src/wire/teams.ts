import { Type, type Static } from '@sinclair/typebox';
import { StringEnum, Timestamp } from './common.js';

/** A team's slug: what `x-team` and the paths name it by. */
export const TEAM_SLUG_PATTERN = '^[a-z0-9][a-z0-9-]{0,39}$';
/** A user's name, as users are made (src/services/users.ts). */
const USER_NAME_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$';

export const TEAM_ROLES = ['owner', 'member'] as const;
export type TeamRole = (typeof TEAM_ROLES)[number];

export const TeamSlug = Type.String({
  pattern: TEAM_SLUG_PATTERN,
  description: 'Lower-case letters, digits and hyphens, 1 to 40, starting with a letter or digit',
});
const UserName = Type.String({ pattern: USER_NAME_PATTERN, description: "A user's name" });
const Role = StringEnum(TEAM_ROLES, {
  description: 'An owner manages the team and its members; a member acts in its name',
});

export const TeamParams = Type.Object({ slug: TeamSlug });
export const MemberParams = Type.Object({ slug: TeamSlug, user: UserName });

export const CreateTeamRequest = Type.Object({
  slug: TeamSlug,
  name: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 100,
      description: 'Shown in the console; the slug if absent',
    }),
  ),
});

export const AddMemberRequest = Type.Object({
  user: UserName,
  role: Type.Optional(
    StringEnum(TEAM_ROLES, { default: 'member', description: 'member if absent' }),
  ),
});

export const UpdateMemberRequest = Type.Object({ role: Role });

export const Team = Type.Object({
  slug: Type.String(),
  name: Type.String(),
  created_at: Timestamp,
  role: StringEnum(TEAM_ROLES, { description: "The caller's role in the team" }),
});
export type Team = Static<typeof Team>;

export const TeamList = Type.Array(Team);

export const TeamMember = Type.Object({
  user: Type.String(),
  role: StringEnum(TEAM_ROLES),
  added_at: Timestamp,
});
export type TeamMember = Static<typeof TeamMember>;

export const TeamDetail = Type.Object({
  ...Team.properties,
  members: Type.Array(TeamMember),
});
export type TeamDetail = Static<typeof TeamDetail>;
