/**
 * Domain errors. Services throw these; one function in the HTTP layer maps each `kind` to a
 * status code and a FastAPI-compatible body. Messages are sentences a client may show.
 */

export type DomainErrorKind =
  | 'bad-request'
  | 'unauthenticated'
  | 'forbidden'
  | 'not-found'
  | 'quota'
  | 'conflict'
  | 'too-large'
  | 'rate-limited'
  | 'bad-gateway'
  | 'gateway-timeout'
  | 'unavailable'
  | 'validation';

export class DomainError extends Error {
  constructor(
    readonly kind: DomainErrorKind,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class BadRequestError extends DomainError {
  constructor(message: string) {
    super('bad-request', message);
  }
}

export class InvalidChallengeError extends BadRequestError {}
export class InvalidSignatureError extends BadRequestError {}

export class UnauthenticatedError extends DomainError {
  constructor(
    message = 'Not authenticated',
    /** Value for the WWW-Authenticate header. */
    readonly scheme = 'Bearer',
  ) {
    super('unauthenticated', message);
  }
}

export class ForbiddenError extends DomainError {
  constructor(message: string) {
    super('forbidden', message);
  }
}

export class NotFoundError extends DomainError {
  constructor(message: string) {
    super('not-found', message);
  }
}

export class ConflictError extends DomainError {
  constructor(message: string) {
    super('conflict', message);
  }
}

/** A body or a part of it larger than the service takes (413). */
export class PayloadTooLargeError extends DomainError {
  constructor(message: string) {
    super('too-large', message);
  }
}

/** Agentverse answers 406 when a quota is exhausted; real clients know that code. */
export class QuotaExceededError extends DomainError {
  constructor(message: string) {
    super('quota', message);
  }
}

export class RateLimitedError extends DomainError {
  constructor(
    readonly retryAfterSeconds: number,
    message = 'Too many requests, retry later',
  ) {
    super('rate-limited', message);
  }
}

export class BadGatewayError extends DomainError {
  constructor(message: string) {
    super('bad-gateway', message);
  }
}

export class GatewayTimeoutError extends DomainError {
  constructor(message: string) {
    super('gateway-timeout', message);
  }
}

export class ServiceUnavailableError extends DomainError {
  constructor(
    message: string,
    /** When to try again (sent as `Retry-After`), when that is known. */
    readonly retryAfterSeconds?: number,
  ) {
    super('unavailable', message);
  }
}

/** One pydantic-2 style validation item: where, what happened, which rule. */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
  ctx?: Record<string, unknown>;
}

/** A semantic validation failure raised by a service (e.g. an address that does not decode). */
export class RequestValidationError extends DomainError {
  constructor(readonly issues: ValidationIssue[]) {
    super('validation', issues.map((i) => `${i.loc.join('.')}: ${i.msg}`).join('; '));
  }

  static single(
    loc: (string | number)[],
    msg: string,
    type = 'value_error',
  ): RequestValidationError {
    return new RequestValidationError([{ loc, msg, type }]);
  }
}
