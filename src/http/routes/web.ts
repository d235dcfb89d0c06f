import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ICON_SVG } from '../assets/icon.js';

/** Where `npm run build` puts the pages: dist/web under the package root. */
const WEB_ROOT = fileURLToPath(new URL('../../../dist/web/', import.meta.url));

/**
 * The origin of an http(s) URL on this machine's loopback, or undefined for anything else: a
 * uAgent's server accepts `/connect` from its own machine only, and the inspector talks to no
 * other.
 */
function loopbackOrigin(text: unknown): string | undefined {
  if (typeof text !== 'string') return undefined;
  try {
    const url = new URL(text);
    const loopback =
      url.hostname === 'localhost' ||
      url.hostname === '[::1]' ||
      /^127(\.\d{1,3}){3}$/.test(url.hostname);
    return (url.protocol === 'http:' || url.protocol === 'https:') && loopback
      ? url.origin
      : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The pages' Content-Security-Policy: scripts and styles from this origin only (no inline
 * script, no eval), no plugins, no framing. The inspector may also talk to the one local agent
 * its `uri` names, when that is on the loopback.
 */
function contentSecurityPolicy(agentOrigin?: string): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    `connect-src 'self'${agentOrigin ? ` ${agentOrigin}` : ''}`,
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "object-src 'none'",
  ].join('; ');
}

function pageHeaders(reply: FastifyReply, agentOrigin?: string): FastifyReply {
  return reply.headers({
    'content-security-policy': contentSecurityPolicy(agentOrigin),
    'x-content-type-options': 'nosniff',
    'x-frame-options': 'DENY',
    'referrer-policy': 'no-referrer',
    'cache-control': 'no-store',
  });
}

/**
 * The web console (`/`) and the agent inspector (`/inspect/`), built by Vite into dist/web
 * and served by this process. Without a build the pages say how to make one.
 */
export async function webRoutes(
  app: FastifyInstance,
  root = WEB_ROOT,
  options: { allowPrivateTargets: boolean } = { allowPrivateTargets: false },
): Promise<void> {
  const page = (name: string): (() => string | undefined) => {
    let cached: string | undefined;
    return () => {
      if (cached !== undefined) return cached;
      const file = join(root, name);
      if (!existsSync(file)) return undefined;
      cached = readFileSync(file, 'utf8');
      return cached;
    };
  };
  const consolePage = page('index.html');
  const inspectorFile = page('inspect/index.html');
  // The inspector refuses a proxy endpoint this server would never forward to: it is told
  // whether the server forwards to loopback and private addresses.
  const privateTargets = `<meta name="agentry-private-targets" content="${options.allowPrivateTargets ? 'allowed' : 'refused'}">`;
  const inspectorPage = (): string | undefined =>
    inspectorFile()?.replace('<head>', `<head>\n    ${privateTargets}`);
  const notBuilt = 'The web pages are not built: run `npm run build`.';

  await app.register(fastifyStatic, {
    root: join(root, 'assets'),
    prefix: '/assets/',
    // Vite names assets after their content hashes.
    immutable: true,
    maxAge: '365d',
    index: false,
    decorateReply: false,
    setHeaders: (res) => {
      res.setHeader('x-content-type-options', 'nosniff');
    },
  });

  app.get('/', { config: { auth: 'none' }, schema: { hide: true } }, async (_request, reply) => {
    const html = consolePage();
    if (html === undefined) return reply.code(503).type('text/plain').send(notBuilt);
    return pageHeaders(reply).type('text/html; charset=utf-8').send(html);
  });

  // Browsers ask for `/favicon.ico` on any page (the API docs, a JSON answer); the pages link
  // `/favicon.svg`. Both are the one icon, which every browser in use reads as SVG.
  for (const path of ['/favicon.ico', '/favicon.svg']) {
    app.get(path, { config: { auth: 'none' }, schema: { hide: true } }, async (_request, reply) =>
      reply
        .headers({ 'cache-control': 'public, max-age=86400', 'x-content-type-options': 'nosniff' })
        .type('image/svg+xml')
        .send(ICON_SVG),
    );
  }

  app.get(
    '/inspect/',
    { config: { auth: 'none' }, schema: { hide: true } },
    async (request, reply) => {
      const html = inspectorPage();
      if (html === undefined) return reply.code(503).type('text/plain').send(notBuilt);
      const origin = loopbackOrigin((request.query as { uri?: unknown }).uri);
      return pageHeaders(reply, origin).type('text/html; charset=utf-8').send(html);
    },
  );

  app.get(
    '/inspect',
    { config: { auth: 'none' }, schema: { hide: true } },
    async (request, reply) => {
      const query = request.url.indexOf('?');
      return reply.redirect(`/inspect/${query < 0 ? '' : request.url.slice(query)}`, 301);
    },
  );
}
