import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { AuthRequirement } from '../../auth/principal.js';
import { ErrorDetail, ValidationErrorBody } from '../../wire/common.js';
import { BRAND, ICON_SVG, LOGO_SVG } from '../assets/icon.js';

/** The docs' top bar and links in the console's colours. */
const DOCS_CSS = `
.swagger-ui .topbar { background-color: ${BRAND.navy}; }
.swagger-ui .topbar .download-url-wrapper { display: none; }
.swagger-ui .info .title, .swagger-ui .info a { color: ${BRAND.navy}; }
.swagger-ui .btn.authorize { color: ${BRAND.accent}; border-color: ${BRAND.accent}; }
.swagger-ui .btn.authorize svg { fill: ${BRAND.accent}; }
`;

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
    transformObject: (document) => {
      if (!('openapiObject' in document)) return document.swaggerObject;
      const { openapiObject } = document;
      if (openapiObject.paths) openapiObject.paths = pairTeamPaths(openapiObject.paths);
      return openapiObject;
    },
  });
  // Each route's `auth` option is the single truth about who may call it; the document
  // follows it rather than repeating it in every schema.
  app.addHook('onRoute', (route) => {
    const auth = route.config?.auth ?? 'none';
    if (auth === 'none' || !route.schema) return;
    route.schema = { ...route.schema, security: securityFor[auth] };
  });
  await app.register(swaggerUi, {
    routePrefix: '/docs',
    staticCSP: true,
    // Everything from this server: no validator badge fetched from swagger.io, no fonts or
    // styles from elsewhere, and no upgrade to an https that a plain-http server lacks.
    transformStaticCSP: (header) =>
      header
        .replace(' validator.swagger.io', '')
        .replaceAll(" 'self' https:", " 'self'")
        .replace(/\s*upgrade-insecure-requests;?/, ''),
    logo: { type: 'image/svg+xml', content: Buffer.from(LOGO_SVG), href: '/', target: '_self' },
    theme: {
      title: 'Agentry API',
      css: [{ filename: 'agentry.css', content: DOCS_CSS }],
      favicon: [
        {
          filename: 'favicon.svg',
          rel: 'icon',
          sizes: 'any',
          type: 'image/svg+xml',
          content: Buffer.from(ICON_SVG),
        },
      ],
    },
  });
  app.get('/openapi.json', { config: { auth: 'none' }, schema: { hide: true } }, async () =>
    app.swagger(),
  );
}

/** A path that repeats another for a team: `<before>/teams/{slug}<after>` repeats `<before><after>`. */
const TEAM_VARIANT = /^(.*)\/teams\/\{slug\}(\/.*)$/;

/**
 * The paths in the order their routes were added, but for the team's variants of a resource
 * registered for the caller and again for a team (the Hosting API, under
 * `/v1/hosting/teams/{slug}`): each comes right after the caller's path it repeats, so that the
 * two read side by side.
 */
function pairTeamPaths<T>(paths: Record<string, T>): Record<string, T> {
  const variants = new Map<string, string[]>();
  for (const path of Object.keys(paths)) {
    const match = TEAM_VARIANT.exec(path);
    const repeated = match && `${match[1]}${match[2]}`;
    if (repeated && Object.hasOwn(paths, repeated)) {
      variants.set(repeated, [...(variants.get(repeated) ?? []), path]);
    }
  }
  const moved = new Set([...variants.values()].flat());
  const ordered: Record<string, T> = {};
  for (const [path, item] of Object.entries(paths)) {
    if (moved.has(path)) continue;
    ordered[path] = item;
    for (const variant of variants.get(path) ?? []) ordered[variant] = paths[variant]!;
  }
  return ordered;
}
