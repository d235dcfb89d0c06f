import type { Duplex } from 'node:stream';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  DomainError,
  RateLimitedError,
  RequestValidationError,
  ServiceUnavailableError,
  UnauthenticatedError,
  type DomainErrorKind,
  type ValidationIssue,
} from '../../errors.js';
import { toValidationIssues } from '../../wire/check.js';
import { excessiveDepthAt, MAX_JSON_DEPTH } from '../../wire/json-depth.js';
import { requestPart } from './validation.js';

const statusOf: Record<DomainErrorKind, number> = {
  'bad-request': 400,
  unauthenticated: 401,
  forbidden: 403,
  'not-found': 404,
  quota: 406,
  conflict: 409,
  'too-large': 413,
  validation: 422,
  'rate-limited': 429,
  'bad-gateway': 502,
  'gateway-timeout': 504,
  unavailable: 503,
};

interface ErrorAnswer {
  status: number;
  body: { detail: string | ValidationIssue[] };
  headers?: Record<string, string>;
}

const notAnObject: ValidationIssue[] = [
  {
    loc: ['body'],
    msg: 'Input should be a valid dictionary or object to extract fields from',
    type: 'model_attributes_type',
  },
];

/**
 * The one place where an error becomes an HTTP answer: domain errors by kind, validator
 * errors as pydantic-style items, framework errors by code, and anything else as a 500 that
 * names the request id but never the cause.
 */
function toErrorAnswer(err: unknown, requestId: string): ErrorAnswer {
  if (err instanceof RequestValidationError) {
    return { status: 422, body: { detail: err.issues } };
  }
  if (err instanceof DomainError) {
    const answer: ErrorAnswer = { status: statusOf[err.kind], body: { detail: err.message } };
    if (err instanceof UnauthenticatedError) answer.headers = { 'www-authenticate': err.scheme };
    if (
      (err instanceof RateLimitedError || err instanceof ServiceUnavailableError) &&
      err.retryAfterSeconds !== undefined
    ) {
      answer.headers = { 'retry-after': String(err.retryAfterSeconds) };
    }
    return answer;
  }
  const fastifyError = err as Partial<FastifyError>;
  if (fastifyError.validation) {
    const part = requestPart(fastifyError.validationContext);
    return {
      status: 422,
      body: { detail: toValidationIssues(fastifyError.validation as never, part) },
    };
  }
  switch (fastifyError.code) {
    case 'FST_ERR_BAD_URL':
      return { status: 400, body: { detail: 'Invalid URL: a path segment does not decode' } };
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return { status: 414, body: { detail: 'URI Too Long: a path segment is too long' } };
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, body: { detail: 'Request body is too large' } };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return {
        status: 422,
        body: { detail: [{ loc: ['body'], msg: 'Field required', type: 'missing', input: null }] },
      };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 422, body: { detail: notAnObject } };
  }
  const status = fastifyError.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return { status, body: { detail: fastifyError.message ?? 'Bad request' } };
  }
  return {
    status: 500,
    body: { detail: `Internal server error (request id ${requestId})` },
  };
}

/**
 * The answer's JSON text. Serialising it cannot fail the request: should the inputs it echoes
 * not serialise, the items go without them.
 */
export function serializeAnswer(answer: ErrorAnswer): string {
  try {
    return JSON.stringify(answer.body);
  } catch {
    const { detail } = answer.body;
    return JSON.stringify({
      detail:
        typeof detail === 'string'
          ? detail
          : detail.map(({ loc, msg, type }) => ({ loc, msg, type })),
    });
  }
}

/**
 * Errors the router meets before any route (a path segment that does not decode or is too
 * long) answer through {@link toErrorAnswer} too: Fastify's `frameworkErrors` option.
 */
export function frameworkErrors(
  err: FastifyError,
  request: FastifyRequest,
  reply: FastifyReply,
): void {
  const answer = toErrorAnswer(err, request.id);
  void reply.code(answer.status).type('application/json').send(serializeAnswer(answer));
}

const clientErrors: Record<string, [status: number, reason: string, detail: string]> = {
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout', 'Request timed out'],
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large', 'Request headers are too large'],
};

/**
 * A request Node's HTTP parser refuses (malformed, headers too large, too slow) never reaches
 * Fastify: its answer is written to the socket here, in the same JSON shape as every other.
 */
export function clientErrorHandler(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, reason, detail] = clientErrors[err.code ?? ''] ?? [
    400,
    'Bad Request',
    'Malformed HTTP request',
  ];
  if (socket.writable) {
    const body = JSON.stringify({ detail });
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(err);
}

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const answer = toErrorAnswer(err, request.id);
    if (answer.status >= 500) {
      request.log.error({ err, client: request.ip }, 'request failed');
    } else {
      request.log.debug({ status: answer.status, detail: answer.body.detail }, 'request refused');
    }
    if (answer.headers) void reply.headers(answer.headers);
    return reply.code(answer.status).type('application/json').send(serializeAnswer(answer));
  });
  app.setNotFoundHandler((_request, reply) =>
    reply.code(404).type('application/json').send({ detail: 'Not Found' }),
  );
}

/**
 * JSON bodies parse like FastAPI's: a syntax error is a 422 `json_invalid` item, and so is
 * nesting deeper than {@link MAX_JSON_DEPTH}.
 */
export function parseJsonBody(body: string): unknown {
  if (body.length === 0) return undefined;
  const tooDeep = excessiveDepthAt(body);
  if (tooDeep >= 0) {
    throw new RequestValidationError([
      {
        loc: ['body', tooDeep],
        msg: `JSON nested deeper than ${MAX_JSON_DEPTH} levels`,
        type: 'json_invalid',
        input: {},
      },
    ]);
  }
  try {
    return JSON.parse(body);
  } catch (err) {
    const position = /position (\d+)/.exec((err as Error).message)?.[1];
    throw new RequestValidationError([
      {
        loc: ['body', position === undefined ? 0 : Number(position)],
        msg: 'JSON decode error',
        type: 'json_invalid',
        input: {},
      },
    ]);
  }
}

export function installJsonParser(app: FastifyInstance): void {
  const parse = parseJsonBody;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    try {
      done(null, parse(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
  // FastAPI reads a body without a content type as JSON too; other types are not objects.
  app.addContentTypeParser('*', { parseAs: 'string' }, (request, body, done) => {
    if (request.headers['content-type'] !== undefined) {
      done(new RequestValidationError(notAnObject), undefined);
      return;
    }
    try {
      done(null, parse(body as string));
    } catch (err) {
      done(err as Error, undefined);
    }
  });
}
