import { InvalidArgumentError, type Command } from 'commander';
import { TEAM_ROLES, TEAM_SLUG_PATTERN, type TeamRole } from '../../wire/teams.js';
import {
  formatTime,
  isoTime,
  printRows,
  withJsonOption,
  withServices,
  withStoreOptions,
} from '../common.js';

function slug(value: string): string {
  if (!new RegExp(TEAM_SLUG_PATTERN).test(value)) {
    throw new InvalidArgumentError(
      'a team slug is 1 to 40 lower-case letters, digits or hyphens, starting with a letter or digit',
    );
  }
  return value;
}

function role(value: string): TeamRole {
  if (!(TEAM_ROLES as readonly string[]).includes(value)) {
    throw new InvalidArgumentError(`a role is one of ${TEAM_ROLES.join(', ')}`);
  }
  return value as TeamRole;
}

/**
 * `agentry teams list|create|add|role|remove|delete`: teams and their members, as the
 * operator (who may do what a team's owner does). A team's own account is the user
 * `team:<slug>` wherever a command names a user (keys, limits, agents --user).
 */
export function addTeamsCommand(program: Command): void {
  const teams = program.command('teams').description('manage teams and their members');

  withStoreOptions(
    withJsonOption(
      teams.command('list').description('list every team: slug, name, created, members with roles'),
    ),
  ).action(async (flags) => {
    await withServices(flags, async (ctx) => {
      printRows(
        await ctx.services.teams.listAll(),
        [
          { header: 'slug', cell: (team) => team.slug },
          { header: 'name', cell: (team) => team.name },
          { header: 'created', cell: (team) => formatTime(team.created_at) },
          {
            header: 'members',
            cell: (team) => team.members.map((m) => `${m.userName}:${m.role}`).join(','),
          },
        ],
        {
          json: Boolean(flags.json),
          none: 'no teams',
          toJson: (team) => ({
            slug: team.slug,
            name: team.name,
            created: isoTime(team.created_at),
            members: team.members.map((m) => ({ user: m.userName, role: m.role })),
          }),
        },
      );
    });
  });

  withStoreOptions(
    teams
      .command('create <slug>')
      .description('create a team owned by a user')
      .requiredOption('--owner <user>', 'the user who owns it first (name or id)')
      .option('--name <name>', 'the name shown in the console (the slug if absent)'),
  ).action(async (teamSlug: string, flags) => {
    await withServices(flags, async (ctx) => {
      const owner = await ctx.services.users.findUser(flags.owner as string);
      const team = await ctx.services.teams.createTeam(owner.id, slug(teamSlug), flags.name);
      console.log(`created team ${team.slug} (${team.name}) owned by ${owner.name}`);
    });
  });

  withStoreOptions(
    teams
      .command('add <slug> <user>')
      .description('add a user to a team')
      .option('--role <role>', 'owner or member', role, 'member'),
  ).action(async (teamSlug: string, user: string, flags) => {
    await withServices(flags, async (ctx) => {
      const member = await ctx.services.teams.addMember(null, slug(teamSlug), user, flags.role);
      console.log(`added ${member.userName} to ${teamSlug} as ${member.role}`);
    });
  });

  withStoreOptions(
    teams
      .command('role <slug> <user> <role>')
      .description("change a member's role (a team keeps at least one owner)"),
  ).action(async (teamSlug: string, user: string, newRole: string, flags) => {
    await withServices(flags, async (ctx) => {
      const member = await ctx.services.teams.setRole(null, slug(teamSlug), user, role(newRole));
      console.log(`${member.userName} is now ${member.role} of ${teamSlug}`);
    });
  });

  withStoreOptions(
    teams
      .command('remove <slug> <user>')
      .description('remove a member; their next call in the team’s name is refused'),
  ).action(async (teamSlug: string, user: string, flags) => {
    await withServices(flags, async (ctx) => {
      await ctx.services.teams.removeMember(null, slug(teamSlug), user);
      console.log(`removed ${user} from ${teamSlug}`);
    });
  });

  withStoreOptions(
    teams
      .command('delete <slug>')
      .description('delete a team that owns no agent and no name, with its keys and webhooks'),
  ).action(async (teamSlug: string, flags) => {
    await withServices(flags, async (ctx) => {
      await ctx.services.teams.deleteTeam(null, slug(teamSlug));
      console.log(`deleted team ${teamSlug}`);
    });
  });
}
