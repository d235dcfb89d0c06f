import type { FastifyInstance } from 'fastify';
import { RequestValidationError } from '../../errors.js';
import { requestCheck, type RequestPart } from '../../wire/check.js';

const partNames: Record<string, RequestPart> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'header',
};

/** A request part as Fastify names it (`querystring`, `params`…), as a 422 item names it. */
export function requestPart(validationContext: string | undefined): RequestPart {
  return partNames[validationContext ?? 'body'] ?? 'body';
}

/** Every part of every request is checked by the wire's rules (src/wire/check.ts). */
export function installValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) =>
    requestCheck(schema as object, requestPart(httpPart)),
  );
}

/**
 * A rule across two fields of a request, such as a body naming the agent of its path: a 422
 * `value_error` at `loc` unless both hold the same canonical value.
 */
export function requireSame(
  value: string,
  expected: string,
  issue: { loc: (string | number)[]; msg: string },
): void {
  if (value !== expected) {
    throw RequestValidationError.single(issue.loc, `Value error, ${issue.msg}`);
  }
}
