import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { errorResponses, Success } from '../../wire/common.js';
import {
  AddMemberRequest,
  CreateTeamRequest,
  MemberParams,
  TeamDetail,
  TeamList,
  TeamMember,
  TeamParams,
  UpdateMemberRequest,
} from '../../wire/teams.js';
import { actorOf } from '../plugins/auth.js';
import { teamDetailView, teamMemberView, teamView } from '../../views/teams.js';

/**
 * Teams (docs/teams.md): the caller's teams and their members. These calls are about the person
 * making them, whatever team `x-team` names; acting for a team is the header's business on
 * every other call.
 */
export function teamsRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { teams } = ctx.services;

  r.get(
    '/v2/teams',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['teams'],
        summary: 'List My Teams',
        description: 'The teams the caller belongs to, by slug, with the caller’s role in each.',
        response: { 200: TeamList, ...errorResponses(401, 403) },
      },
    },
    async (request) => (await teams.listTeams(actorOf(request))).map(teamView),
  );

  r.post(
    '/v2/teams',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['teams'],
        summary: 'Create Team',
        description:
          'A new team, owned by the caller. Its members act in its name by sending `x-team: <slug>` with their own key.',
        body: CreateTeamRequest,
        response: { 201: TeamDetail, ...errorResponses(401, 403, 409, 422) },
      },
    },
    async (request, reply) => {
      const team = await teams.createTeam(actorOf(request), request.body.slug, request.body.name);
      return reply.code(201).send(teamDetailView(team));
    },
  );

  r.get(
    '/v2/teams/:slug',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['teams'],
        summary: 'Get Team',
        description: 'A team the caller belongs to, with its members.',
        params: TeamParams,
        response: { 200: TeamDetail, ...errorResponses(401, 403, 404, 422) },
      },
    },
    async (request) => teamDetailView(await teams.getTeam(actorOf(request), request.params.slug)),
  );

  r.delete(
    '/v2/teams/:slug',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['teams'],
        summary: 'Delete Team',
        description:
          'Owners only, once the team owns no agent and no name; its keys, webhooks, quotas and usage go with it.',
        params: TeamParams,
        response: { 200: Success, ...errorResponses(401, 403, 404, 409, 422) },
      },
    },
    async (request) => {
      await teams.deleteTeam(actorOf(request), request.params.slug);
      return { success: true };
    },
  );

  r.post(
    '/v2/teams/:slug/members',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['teams'],
        summary: 'Add Team Member',
        description: 'Adds an existing user by name, as a member or an owner; owners only.',
        params: TeamParams,
        body: AddMemberRequest,
        response: { 201: TeamMember, ...errorResponses(401, 403, 404, 409, 422) },
      },
    },
    async (request, reply) => {
      const member = await teams.addMember(
        actorOf(request),
        request.params.slug,
        request.body.user,
        request.body.role ?? 'member',
      );
      return reply.code(201).send(teamMemberView(member));
    },
  );

  r.put(
    '/v2/teams/:slug/members/:user',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['teams'],
        summary: 'Change Team Member Role',
        description: 'Owners only; the last owner stays one.',
        params: MemberParams,
        body: UpdateMemberRequest,
        response: { 200: TeamMember, ...errorResponses(401, 403, 404, 409, 422) },
      },
    },
    async (request) =>
      teamMemberView(
        await teams.setRole(
          actorOf(request),
          request.params.slug,
          request.params.user,
          request.body.role,
        ),
      ),
  );

  r.delete(
    '/v2/teams/:slug/members/:user',
    {
      config: { auth: 'user' },
      schema: {
        tags: ['teams'],
        summary: 'Remove Team Member',
        description:
          'An owner removes any member, a member only themself (leaving); the last owner cannot go. Access in the team’s name ends at once.',
        params: MemberParams,
        response: { 200: Success, ...errorResponses(401, 403, 404, 409, 422) },
      },
    },
    async (request) => {
      await teams.removeMember(actorOf(request), request.params.slug, request.params.user);
      return { success: true };
    },
  );
}
