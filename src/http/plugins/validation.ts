import { Ajv, type ErrorObject, type Options as AjvOptions } from 'ajv';
import type { FastifyInstance } from 'fastify';
import type { ValidationIssue } from '../../errors.js';

/**
 * Bodies are checked strictly, as pydantic does: a number is not a string. Query, path and
 * header values are text on the wire and are coerced to the declared types.
 */
const shared: AjvOptions = {
  allErrors: true,
  useDefaults: true,
  removeAdditional: false,
  verbose: true,
  strict: false,
};
const bodyAjv = new Ajv({ ...shared, coerceTypes: false });
const textAjv = new Ajv({ ...shared, coerceTypes: 'array' });

export function installValidation(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) =>
    (httpPart === 'body' ? bodyAjv : textAjv).compile(schema as object),
  );
}

export type RequestPart = 'body' | 'query' | 'path' | 'header';

const partNames: Record<string, RequestPart> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'header',
};

export function requestPart(validationContext: string | undefined): RequestPart {
  return partNames[validationContext ?? 'body'] ?? 'body';
}

const typeIssues: Record<string, [type: string, msg: string]> = {
  string: ['string_type', 'Input should be a valid string'],
  integer: ['int_type', 'Input should be a valid integer'],
  number: ['float_type', 'Input should be a valid number'],
  boolean: ['bool_type', 'Input should be a valid boolean'],
  array: ['list_type', 'Input should be a valid list'],
  object: ['dict_type', 'Input should be a valid dictionary'],
};

const parsingIssues: Record<string, [type: string, msg: string]> = {
  integer: ['int_parsing', 'Input should be a valid integer, unable to parse string as an integer'],
  number: ['float_parsing', 'Input should be a valid number, unable to parse string as a number'],
  boolean: ['bool_parsing', 'Input should be a valid boolean, unable to interpret input'],
};

function pointerToLoc(pointer: string): (string | number)[] {
  if (pointer === '') return [];
  return pointer
    .slice(1)
    .split('/')
    .map((segment) => segment.replace(/~1/g, '/').replace(/~0/g, '~'))
    .map((segment) => (/^\d+$/.test(segment) ? Number(segment) : segment));
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function quoteList(values: readonly unknown[]): string {
  const quoted = values.map((v) => `'${String(v)}'`);
  return quoted.length <= 1
    ? (quoted[0] ?? '')
    : `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`;
}

/** One Ajv error as pydantic 2 words it; undefined for errors that only repeat another. */
function toIssue(error: ErrorObject, part: RequestPart): ValidationIssue | undefined {
  const loc: (string | number)[] = [part, ...pointerToLoc(error.instancePath)];
  const input = error.data;
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return {
        loc: [...loc, String(params.missingProperty)],
        msg: 'Field required',
        type: 'missing',
        input,
      };
    case 'type': {
      const expected = String(params.type).split(',')[0] ?? 'object';
      if (loc.length === 1 && part === 'body') {
        return input === undefined || input === null
          ? { loc, msg: 'Field required', type: 'missing', input: null }
          : {
              loc,
              msg: 'Input should be a valid dictionary or object to extract fields from',
              type: 'model_attributes_type',
              input,
            };
      }
      const table = part !== 'body' && typeof input === 'string' ? parsingIssues : typeIssues;
      const [type, msg] = table[expected] ??
        typeIssues[expected] ?? ['value_error', error.message ?? 'Invalid value'];
      return { loc, msg, type, input };
    }
    case 'maxLength':
      return {
        loc,
        msg: `String should have at most ${plural(Number(params.limit), 'character')}`,
        type: 'string_too_long',
        input,
        ctx: { max_length: params.limit },
      };
    case 'minLength':
      return {
        loc,
        msg: `String should have at least ${plural(Number(params.limit), 'character')}`,
        type: 'string_too_short',
        input,
        ctx: { min_length: params.limit },
      };
    case 'pattern':
      return {
        loc,
        msg: `String should match pattern '${String(params.pattern)}'`,
        type: 'string_pattern_mismatch',
        input,
        ctx: { pattern: params.pattern },
      };
    case 'enum':
      return {
        loc,
        msg: `Input should be ${quoteList(params.allowedValues as unknown[])}`,
        type: 'literal_error',
        input,
      };
    case 'const':
      return {
        loc,
        msg: `Input should be ${quoteList([params.allowedValue])}`,
        type: 'literal_error',
        input,
      };
    case 'maxItems':
      return {
        loc,
        msg: `List should have at most ${plural(Number(params.limit), 'item')} after validation, not ${Array.isArray(input) ? input.length : '?'}`,
        type: 'too_long',
        input,
      };
    case 'minItems':
      return {
        loc,
        msg: `List should have at least ${plural(Number(params.limit), 'item')} after validation, not ${Array.isArray(input) ? input.length : '?'}`,
        type: 'too_short',
        input,
      };
    case 'minimum':
      return {
        loc,
        msg: `Input should be greater than or equal to ${String(params.limit)}`,
        type: 'greater_than_equal',
        input,
        ctx: { ge: params.limit },
      };
    case 'maximum':
      return {
        loc,
        msg: `Input should be less than or equal to ${String(params.limit)}`,
        type: 'less_than_equal',
        input,
        ctx: { le: params.limit },
      };
    case 'exclusiveMinimum':
      return {
        loc,
        msg: `Input should be greater than ${String(params.limit)}`,
        type: 'greater_than',
        input,
        ctx: { gt: params.limit },
      };
    case 'anyOf':
    case 'oneOf':
      // The branch errors already say what is wrong.
      return undefined;
    default:
      return { loc, msg: error.message ?? 'Invalid value', type: 'value_error', input };
  }
}

/** Maps the validator's errors for one request part to pydantic-style items. */
export function toValidationIssues(errors: ErrorObject[], part: RequestPart): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const seen = new Set<string>();
  for (const error of errors) {
    const issue = toIssue(error, part);
    if (!issue) continue;
    const key = `${JSON.stringify(issue.loc)}|${issue.type}`;
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push(issue);
  }
  return issues;
}
