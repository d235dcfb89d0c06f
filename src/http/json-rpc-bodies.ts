import type { FastifyInstance } from 'fastify';
import { parseJsonBody } from './plugins/errors.js';

/** A body that was not JSON: the protocol answers a JSON-RPC parse error. */
export const NOT_JSON = Symbol('not JSON');
/** A body sent as another media type than JSON: the protocol answers 415. */
export const NOT_JSON_TYPE = Symbol('not sent as JSON');

/**
 * Makes the routes of an encapsulated plugin take their bodies as a JSON-RPC endpoint does
 * (the MCP and A2A endpoints): JSON of the media types given is parsed, and what is not JSON,
 * or not sent as JSON, reaches the handler as {@link NOT_JSON} or {@link NOT_JSON_TYPE} for the
 * protocol to answer, rather than the HTTP API's `{detail}`.
 */
export function acceptJsonRpcBodies(app: FastifyInstance, jsonTypes: string[]): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(jsonTypes, { parseAs: 'string' }, (_request, body, done) => {
    try {
      done(null, parseJsonBody(body as string));
    } catch {
      done(null, NOT_JSON);
    }
  });
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, _body, done) => {
    done(null, NOT_JSON_TYPE);
  });
}
