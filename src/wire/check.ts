import { Ajv, type ErrorObject, type Options as AjvOptions } from 'ajv';
import type { DataValidateFunction } from 'ajv/dist/types/index.js';
import type { ValidationIssue } from '../errors.js';
import { wireFormats, type WireFormat } from './formats.js';

// How values are checked against the wire schemas: the validator (Ajv) with the wire formats
// enforced, text no store can keep refused, and the validator's errors worded as pydantic
// words them. The HTTP layer installs these checks for every route; stored data is checked
// by the same rules outside any request.

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
  // The schemas are TypeBox's, compiled at start-up; checking them against the JSON Schema
  // meta-schema would run the meta-schema's own `format`s through the keyword below.
  validateSchema: false,
  // NaN and ±Infinity are not numbers of any schema (JSON.parse reads 1e400 as Infinity).
  strictNumbers: true,
};

/**
 * A `format` that names a wire format (src/wire/formats.ts) is enforced: the value is checked
 * and, for formats with a canonical spelling, rewritten to it in place, so that handlers see
 * canonical values only. Ajv's own `format` keyword only checks, so it is replaced. Any other
 * format (such as those of JSON Schema's own meta-schema) is an annotation, as JSON Schema
 * makes formats by default.
 */
function compileFormat(format: string): DataValidateFunction {
  const wire = (wireFormats as Record<string, WireFormat | undefined>)[format];
  if (wire === undefined) return () => true;
  const check: DataValidateFunction = (value, data) => {
    const canonical = wire.canonical(value as string);
    if (canonical === undefined) {
      check.errors = [{ keyword: 'format', message: 'format', params: { format } }];
      return false;
    }
    if (wire.rewrite && canonical !== value && data) {
      (data.parentData as Record<string | number, unknown>)[data.parentDataProperty] = canonical;
    }
    return true;
  };
  return check;
}

function withWireFormats(options: AjvOptions): Ajv {
  const ajv = new Ajv(options);
  ajv.removeKeyword('format');
  ajv.addKeyword({
    keyword: 'format',
    type: 'string',
    schemaType: 'string',
    modifying: true,
    errors: true,
    compile: compileFormat,
  });
  return ajv;
}

const bodyAjv = withWireFormats({ ...shared, coerceTypes: false });
const textAjv = withWireFormats({ ...shared, coerceTypes: 'array' });

/** A compiled check: whether the value passes, and the validator's errors when it does not. */
export interface Validate {
  (data: unknown): boolean;
  errors?: ErrorObject[] | null;
}

function hasNonFinite(data: unknown): boolean {
  if (typeof data !== 'object' || data === null) return false;
  for (const value of Object.values(data)) {
    if (typeof value === 'number' && !Number.isFinite(value)) return true;
  }
  return false;
}

/**
 * Query, path and header values are coerced from text; a value that coerced to a non-finite
 * number is checked again without coercion, which reports it as not a number of its type.
 */
function compileText(schema: object): Validate {
  const coerce = textAjv.compile(schema);
  let strict: Validate | undefined;
  const validate: Validate = (data) => {
    if (!coerce(data)) {
      validate.errors = coerce.errors;
      return false;
    }
    if (!hasNonFinite(data)) return true;
    // Checked again as a body is, without coercion: 'Infinity' coerces to a number no bound stops.
    strict ??= bodyAjv.compile(schema);
    strict(data);
    validate.errors = strict.errors;
    return false;
  };
  return validate;
}

const NUL_MESSAGE = 'Value error, text must not contain NUL characters (\\u0000)';
const SURROGATE_MESSAGE =
  'Value error, text must be valid Unicode: a lone surrogate (\\ud800–\\udfff) cannot be stored';

function escapePointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1');
}

/** A lone UTF-16 surrogate: not a character, so it has no UTF-8 form to store. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why no store can keep this text as it is, if so. */
function unstorable(text: string): string | undefined {
  if (text.includes('\u0000')) return NUL_MESSAGE;
  if (LONE_SURROGATE.test(text)) return SURROGATE_MESSAGE;
  return undefined;
}

/**
 * The errors for every text in `data`, values and keys alike, at any depth (walked without
 * recursion), that no store can keep as it is: one with a NUL character (PostgreSQL refuses
 * it; a C string would end there) or a lone surrogate (it would be replaced, silently, on its
 * way to UTF-8).
 */
function unstorableTextErrors(data: unknown): ErrorObject[] {
  const errors: ErrorObject[] = [];
  const error = (instancePath: string, value: string, message: string): ErrorObject => ({
    keyword: 'text',
    instancePath,
    schemaPath: '',
    params: {},
    message,
    data: value,
  });
  const pending: [unknown, string][] = [[data, '']];
  while (pending.length > 0) {
    const [value, path] = pending.pop()!;
    if (typeof value === 'string') {
      const message = unstorable(value);
      if (message) errors.push(error(path, value, message));
    } else if (value !== null && typeof value === 'object') {
      for (const [key, child] of Object.entries(value)) {
        const childPath = `${path}/${escapePointer(key)}`;
        const message = unstorable(key);
        if (message) errors.push(error(childPath, key, message));
        else pending.push([child, childPath]);
      }
    }
  }
  return errors.reverse();
}

/**
 * Checks a request part against its schema, after refusing text no store can keep anywhere
 * in it: once here, for every route, rather than field by field.
 */
function refusingUnstorableText(validate: Validate): Validate {
  const check: Validate = (data) => {
    const errors = unstorableTextErrors(data);
    if (errors.length > 0) {
      check.errors = errors;
      return false;
    }
    const valid = validate(data);
    check.errors = validate.errors;
    return valid;
  };
  return check;
}

/** The part of a request a value comes from: the first member of a 422 item's `loc`. */
export type RequestPart = 'body' | 'query' | 'path' | 'header';

/**
 * The check of one request part against its schema. Bodies are checked strictly; query, path
 * and header values are coerced from text.
 */
export function requestCheck(schema: object, part: RequestPart): Validate {
  return refusingUnstorableText(part === 'body' ? bodyAjv.compile(schema) : compileText(schema));
}

/**
 * A check of a value against a body schema, formats included, outside any request (such as
 * stored data that must still have the shape a route admits): its pydantic-style issues,
 * none when it passes.
 */
export function bodyChecker(schema: object): (value: unknown) => ValidationIssue[] {
  const validate = bodyAjv.compile(schema);
  return (value) => (validate(value) ? [] : toValidationIssues(validate.errors ?? [], 'body'));
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
    case 'format': {
      const wire = (wireFormats as Record<string, WireFormat>)[String(params.format)];
      return wire && { loc, ...wire.issue(String(input)), input };
    }
    case 'text':
      return { loc, msg: error.message ?? NUL_MESSAGE, type: 'value_error', input };
    case 'anyOf':
    case 'oneOf':
      // The branch errors already say what is wrong.
      return undefined;
    default:
      return { loc, msg: error.message ?? 'Invalid value', type: 'value_error', input };
  }
}

/**
 * Maps the validator's errors for one request part to pydantic-style items. Wire formats are
 * reported once the part's shape is right (every field present, of its type and length), as
 * checks of the value's meaning come after its shape.
 */
export function toValidationIssues(errors: ErrorObject[], part: RequestPart): ValidationIssue[] {
  const issues: ValidationIssue[] = [];
  const seen = new Set<string>();
  const shapeIsWrong = errors.some((error) => error.keyword !== 'format');
  for (const error of errors) {
    if (error.keyword === 'format' && shapeIsWrong) continue;
    const issue = toIssue(error, part);
    if (!issue) continue;
    const key = `${JSON.stringify(issue.loc)}|${issue.type}`;
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push(issue);
  }
  return issues;
}
