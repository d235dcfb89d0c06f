import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  DomainError,
  RateLimitedError,
  RequestValidationError,
  UnauthenticatedError,
  type DomainErrorKind,
  type ValidationIssue,
} from '../../errors.js';
import { requestPart, toValidationIssues } from './validation.js';

const statusOf: Record<DomainErrorKind, number> = {
  'bad-request': 400,
  unauthenticated: 401,
  forbidden: 403,
  'not-found': 404,
  quota: 406,
  conflict: 409,
  validation: 422,
  'rate-limited': 429,
  'bad-gateway': 502,
  'gateway-timeout': 504,
  unavailable: 503,
};

export interface ErrorAnswer {
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
export function toErrorAnswer(err: unknown, requestId: string): ErrorAnswer {
  if (err instanceof RequestValidationError) {
    return { status: 422, body: { detail: err.issues } };
  }
  if (err instanceof DomainError) {
    const answer: ErrorAnswer = { status: statusOf[err.kind], body: { detail: err.message } };
    if (err instanceof UnauthenticatedError) answer.headers = { 'www-authenticate': err.scheme };
    if (err instanceof RateLimitedError) {
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

export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, request: FastifyRequest, reply: FastifyReply) => {
    const answer = toErrorAnswer(err, request.id);
    if (answer.status >= 500) {
      request.log.error({ err }, 'request failed');
    } else {
      request.log.debug({ status: answer.status, detail: answer.body.detail }, 'request refused');
    }
    if (answer.headers) void reply.headers(answer.headers);
    return reply.code(answer.status).type('application/json').send(answer.body);
  });
  app.setNotFoundHandler((_request, reply) =>
    reply.code(404).type('application/json').send({ detail: 'Not Found' }),
  );
}

/** JSON bodies parse like FastAPI's: a syntax error is a 422 `json_invalid` item. */
export function installJsonParser(app: FastifyInstance): void {
  const parse = (body: string): unknown => {
    if (body.length === 0) return undefined;
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
  };
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
