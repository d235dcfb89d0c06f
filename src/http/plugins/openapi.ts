import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { AuthRequirement } from '../../auth/principal.js';
import { ErrorDetail, ValidationErrorBody } from '../../wire/common.js';

const securityFor: Record<Exclude<AuthRequirement, 'none'>, Record<string, string[]>[]> = {
  user: [{ bearer: [] }],
  'user-or-agent': [{ bearer: [] }, { agent: [] }],
  'user-or-any-agent': [{ bearer: [] }, { agent: [] }],
  'agent-body-source': [{ agent: [] }],
  agent: [{ agent: [] }],
  'agent-token': [{ v1token: [] }],
  'optional-user': [{}, { bearer: [] }],
};

/** `/openapi.json` is generated from the route schemas; `/docs` is a page for people. */
export async function installOpenApi(app: FastifyInstance, version: string): Promise<void> {
  app.addSchema(ErrorDetail);
  app.addSchema(ValidationErrorBody);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Agentry',
        version,
        description:
          'Self-hostable identity, registry, mailbox and proxy service for uAgents, wire-compatible with the Agentverse API.',
      },
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'User API key' },
          agent: {
            type: 'apiKey',
            in: 'header',
            name: 'Authorization',
            description: 'Agent attestation: "Agent attr:<base64 payload>:<sig>"',
          },
          v1token: {
            type: 'apiKey',
            in: 'header',
            name: 'Authorization',
            description:
              'v1 mailroom access token of an agent (uAgents 0.22): "token <access_token>" from POST /v1/auth/prove',
          },
        },
      },
    },
    refResolver: {
      buildLocalReference: (json, _baseUri, _fragment, i) => String(json.$id ?? `def-${i}`),
    },
  });
  // Each route's `auth` option is the single truth about who may call it; the document
  // follows it rather than repeating it in every schema.
  app.addHook('onRoute', (route) => {
    const auth = route.config?.auth ?? 'none';
    if (auth === 'none' || !route.schema) return;
    route.schema = { ...route.schema, security: securityFor[auth] };
  });
  await app.register(swaggerUi, { routePrefix: '/docs', staticCSP: true });
  app.get('/openapi.json', { config: { auth: 'none' }, schema: { hide: true } }, async () =>
    app.swagger(),
  );
}
