import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { errorResponses } from '../../wire/common.js';
import {
  GeneratedHandle,
  HandleAvailability,
  HandleAvailabilityRequest,
  HandleBaseParams,
  HandleParams,
} from '../../wire/handles.js';

/** Whether a handle is free, and free handles made from a name (docs/almanac.md, "Handles"). */
export function handlesRoutes(app: FastifyInstance, ctx: AppContext): void {
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const { handles } = ctx.services;

  r.post(
    '/v1/almanac/handles/available',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Check Agent Handle Availability',
        description:
          'The handle a name reads as (its letters and digits in dash-separated lower-case words), whether registration would accept it, and a free one made from it when it is taken.',
        body: HandleAvailabilityRequest,
        response: { 200: HandleAvailability, ...errorResponses(409, 422) },
      },
    },
    (request) => handles.availabilityOfName(request.body.name),
  );

  r.get(
    '/v2/almanac/handles/:handle/available',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Check Handle Availability V2',
        description:
          'Whether registration would accept the handle (no listing carries it and no enrolment keeps it), and a free one made from it when it is taken.',
        params: HandleParams,
        response: { 200: HandleAvailability, ...errorResponses(409, 422) },
      },
    },
    (request) => handles.availability(request.params.handle),
  );

  r.get(
    '/v2/almanac/handles/:handle/generate',
    {
      config: { auth: 'none' },
      schema: {
        tags: ['almanac'],
        summary: 'Generate Handle V2',
        description:
          "A free handle made from the name: the name's letters and digits in dash-separated lower-case words when they are free, else those words and a random one.",
        params: HandleBaseParams,
        response: { 200: GeneratedHandle, ...errorResponses(409, 422) },
      },
    },
    async (request) => ({ handle: await handles.generate(request.params.handle) }),
  );
}
