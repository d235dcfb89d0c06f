import { after, before, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { registerAgent } from '../kit/agents.js';
import { createTestDatabase, type TestDatabase } from '../kit/databases.js';
import { describeOnEachDialect } from '../kit/dialects.js';
import { call, firstChunk } from '../kit/http.js';
import { spawnServer, type ServerProcess } from '../kit/process.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

/**
 * Drives every operation of the running service's own OpenAPI document with generated
 * requests, some shaped as the schema says and some hostile, and holds the service to its
 * contract: never a 5xx, every error JSON with `detail`, and the process still up after.
 * Runs per operation are bounded so that the suite takes seconds per store.
 */
const RUNS_PER_OPERATION = Number(process.env.AGENTRY_FUZZ_RUNS ?? 30);

interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  patternProperties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  const?: unknown;
  format?: string;
  pattern?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  anyOf?: Schema[];
  oneOf?: Schema[];
  default?: unknown;
}

interface Parameter {
  in: 'path' | 'query' | 'header';
  name: string;
  schema: Schema;
}

interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  body?: Schema;
  /**
   * 5xx answers the document lists for the operation: the proxy's 502 and 504 say that the
   * target agent failed, not the service.
   */
  gatewayStatuses: number[];
}

interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string;
}

/** Values the service knows, so that generated requests also reach past the checks. */
interface Known {
  agent: TestIdentity;
  userKey: string;
  envelopes: unknown[];
  /** A v1 mailroom access token of `agent`. */
  v1Token: string;
}

const text = fc.string({ maxLength: 24 });

/** Leaves a service must refuse politely; text stays printable (NUL is another issue's). */
const hostileLeaf = fc.oneof(
  fc.constantFrom<unknown>(
    1e308,
    -1e308,
    2 ** 64,
    -1,
    0.5,
    '',
    ' ',
    'x'.repeat(4_000),
    '../../etc/passwd',
    "'; drop table messages; --",
    'agent1' + 'q'.repeat(58),
    'AGENT1',
    'proto:',
    null,
    true,
    [],
    {},
    { __proto__: { polluted: true } },
  ),
  fc.jsonValue({ maxDepth: 2 }),
);

function arbitraryFor(schema: Schema, known: Known): fc.Arbitrary<unknown> {
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (schema.enum) return fc.constantFrom(...schema.enum);
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches) return fc.oneof(...branches.map((branch) => arbitraryFor(branch, known)));
  if (Array.isArray(schema.type)) {
    return fc.oneof(...schema.type.map((type) => arbitraryFor({ ...schema, type }, known)));
  }
  switch (schema.type) {
    case 'string':
      return stringFor(schema, known);
    case 'integer':
      return fc.integer({
        min: Math.max(
          schema.minimum ?? (schema.exclusiveMinimum ?? -1_000_001) + 1,
          Number.MIN_SAFE_INTEGER,
        ),
        max: Math.min(schema.maximum ?? 1_000_000_000_000, Number.MAX_SAFE_INTEGER),
      });
    case 'number':
      return fc.double({ noNaN: true, noDefaultInfinity: true });
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array':
      return fc.array(schema.items ? arbitraryFor(schema.items, known) : fc.jsonValue(), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 3, 3),
      });
    case 'object': {
      const properties = schema.properties ?? {};
      const names = Object.keys(properties);
      if (names.length === 0) {
        const values = Object.values(schema.patternProperties ?? {})[0];
        return fc.dictionary(text, values ? arbitraryFor(values, known) : fc.jsonValue(), {
          maxKeys: 3,
        });
      }
      const record: Record<string, fc.Arbitrary<unknown>> = {};
      for (const name of names) record[name] = arbitraryFor(properties[name]!, known);
      return fc.record(record, { requiredKeys: schema.required ?? [] });
    }
    default:
      return fc.jsonValue({ maxDepth: 2 });
  }
}

function stringFor(schema: Schema, known: Known): fc.Arbitrary<string> {
  const address = fc.constantFrom(
    known.agent.address,
    known.agent.address.toUpperCase(),
    TestIdentity.random().address,
  );
  switch (schema.format) {
    case 'agent-address':
      return address;
    case 'almanac-identifier':
      return fc.oneof(
        address.map((a) => `agent://${a}`),
        address.map((a) => `test-agent://${a}`),
        address,
      );
    case 'uuid':
    case 'uuid4':
      return fc.uuid({ version: 4 });
    case 'date-time':
      return fc
        .date({ min: new Date(0), max: new Date(4_102_444_800_000), noInvalidDate: true })
        .map((d) => d.toISOString());
  }
  if (schema.pattern) {
    try {
      return fc.stringMatching(new RegExp(schema.pattern));
    } catch {
      // Patterns fast-check cannot generate from (lookaheads): any text, mostly refused.
    }
  }
  return fc.string({
    minLength: schema.minLength ?? 0,
    maxLength: Math.min(schema.maxLength ?? 24, 24),
  });
}

/** A value shaped by the schema, one of whose leaves may be hostile instead. */
function mostlyShaped(schema: Schema, known: Known): fc.Arbitrary<unknown> {
  const shaped = arbitraryFor(schema, known);
  return fc.oneof(
    { weight: 3, arbitrary: shaped },
    {
      weight: 2,
      arbitrary: fc.tuple(shaped, text, hostileLeaf).map(([value, key, leaf]) => {
        if (typeof value !== 'object' || value === null || Array.isArray(value)) return leaf;
        const keys = Object.keys(value);
        const target = keys.length > 0 ? keys[key.length % keys.length]! : key;
        return { ...value, [target]: leaf };
      }),
    },
    { weight: 1, arbitrary: hostileLeaf },
  );
}

const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

/** A body's text: JSON of a generated value, or text no JSON parser should take quietly. */
function bodyText(operation: Operation, known: Known): fc.Arbitrary<string> {
  const shaped = mostlyShaped(operation.body!, known).map((value) => JSON.stringify(value));
  const signed = operation.path.endsWith('/submit')
    ? [fc.constantFrom(...known.envelopes).map((envelope) => JSON.stringify(envelope))]
    : [];
  return fc.oneof(
    { weight: 6, arbitrary: shaped },
    ...signed.map((arbitrary) => ({ weight: 3, arbitrary })),
    {
      weight: 2,
      arbitrary: fc.oneof(
        fc.constantFrom(
          nested(10_000),
          `{"a":${nested(100)}}`,
          '{"version":1e400}',
          '{"limit":-Infinity}',
          '{',
          '',
          'null',
          '"text"',
          '[]',
          '{"__proto__":{"admin":true}}',
          '{"constructor":{"prototype":{"admin":true}}}',
        ),
        text,
      ),
    },
  );
}

function queryValue(schema: Schema, known: Known): fc.Arbitrary<string | undefined> {
  return fc.option(
    fc.oneof(
      arbitraryFor(schema, known).map(String),
      fc.constantFrom(
        'Infinity',
        '-Infinity',
        'NaN',
        '1e400',
        '-1',
        '1.5',
        '0x10',
        '99999999999999999999',
        '',
      ),
      text,
    ),
    { nil: undefined },
  );
}

function pathValue(schema: Schema, known: Known): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: arbitraryFor(schema, known).map((v) => encodeURIComponent(String(v))) },
    { weight: 1, arbitrary: text.map(encodeURIComponent) },
    { weight: 1, arbitrary: fc.constantFrom('%zz', '%', 'a'.repeat(300), '..', '%2F', '%20') },
  );
}

function authorization(known: Known): fc.Arbitrary<string | undefined> {
  const now = Math.floor(Date.now() / 1000);
  return fc.constantFrom(
    undefined,
    `Bearer ${known.userKey}`,
    `bearer   ${known.userKey}`,
    'Bearer agy_junk',
    'Bearer',
    'Basic dXNlcjpwYXNz',
    `Agent ${known.agent.attestation({ validFrom: now - 60, validTo: now + 3_600 })}`,
    `Agent ${known.agent.attestation({ validFrom: now + 3_600, validTo: now + 7_200 })}`,
    'Agent attr:nonsense',
    `token ${known.v1Token}`,
    'token junk',
  );
}

function requestFor(operation: Operation, known: Known): fc.Arbitrary<FuzzRequest> {
  const pathParams = operation.parameters.filter((p) => p.in === 'path');
  const queryParams = operation.parameters.filter((p) => p.in === 'query');
  const headerParams = operation.parameters.filter((p) => p.in === 'header');
  return fc
    .record({
      method: fc.constantFrom(
        ...(operation.method === 'GET' ? ['GET', 'HEAD'] : [operation.method]),
      ),
      path: fc.tuple(...pathParams.map((p) => pathValue(p.schema, known))),
      query: fc.tuple(...queryParams.map((p) => queryValue(p.schema, known))),
      headers: fc.tuple(
        ...headerParams.map((p) => fc.option(arbitraryFor(p.schema, known).map(String))),
      ),
      authorization: authorization(known),
      body: operation.body ? bodyText(operation, known) : fc.constant(undefined),
      contentType: fc.constantFrom(
        'application/json',
        'application/json',
        'application/json; charset=utf-8',
        'text/plain',
        'application/x-www-form-urlencoded',
        undefined,
      ),
    })
    .map((generated) => {
      let path = operation.path;
      pathParams.forEach((p, i) => (path = path.replace(`{${p.name}}`, generated.path[i]!)));
      const query = queryParams
        .map((p, i) => [p.name, generated.query[i]] as const)
        .filter(([, value]) => value !== undefined)
        .map(([name, value]) => `${name}=${encodeURIComponent(value!)}`)
        .join('&');
      const headers: Record<string, string> = {};
      headerParams.forEach((p, i) => {
        const value = generated.headers[i];
        if (value !== undefined && value !== null) headers[p.name] = value;
      });
      if (generated.authorization !== undefined) headers.authorization = generated.authorization;
      if (generated.body !== undefined && generated.contentType !== undefined) {
        headers['content-type'] = generated.contentType;
      }
      return {
        method: generated.method,
        path: query ? `${path}?${query}` : path,
        headers,
        body: generated.body,
      };
    });
}

function operationsOf(document: {
  paths: Record<
    string,
    Record<
      string,
      { parameters?: Parameter[]; requestBody?: unknown; responses?: Record<string, unknown> }
    >
  >;
}): Operation[] {
  const operations: Operation[] = [];
  for (const [path, methods] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(methods)) {
      const body = (
        operation.requestBody as
          { content?: { 'application/json'?: { schema?: Schema } } } | undefined
      )?.content?.['application/json']?.schema;
      operations.push({
        method: method.toUpperCase(),
        path,
        parameters: operation.parameters ?? [],
        ...(body ? { body } : {}),
        gatewayStatuses: Object.keys(operation.responses ?? {})
          .map(Number)
          .filter((status) => status === 502 || status === 504),
      });
    }
  }
  return operations;
}

describeOnEachDialect('fuzz: every operation of the OpenAPI document', (dialect) => {
  let database: TestDatabase;
  let service: ServerProcess;
  let known: Known;
  let operations: Operation[];
  const statuses = new Map<number, number>();
  let requests = 0;
  let gatewayAnswers = 0;

  before(async () => {
    database = await createTestDatabase(dialect);
    // PostgreSQL keeps no hosting key by itself: hosted agents need one to be created.
    service = await spawnServer(['--database-url', database.url], {
      AGENTRY_HOSTING_KEY: randomBytes(32).toString('hex'),
    });
    const userKey = service.bootstrapKey!;
    const agent = TestIdentity.random();
    await registerAgent({ url: service.url }, userKey, agent);
    const sender = TestIdentity.random();
    const envelopes = Array.from({ length: 4 }, (_, i) =>
      sender.signEnvelope(
        makeEnvelope({ sender: sender.address, target: agent.address, payloadJson: `{"i":${i}}` }),
      ),
    );
    const challenge = await call(service.url, 'POST', '/v1/auth/challenge', {
      body: { address: agent.address },
    });
    const proof = await call(service.url, 'POST', '/v1/auth/prove', {
      body: {
        address: agent.address,
        challenge: challenge.body.challenge,
        challenge_response: agent.signChallenge(challenge.body.challenge),
      },
    });
    assert.equal(proof.status, 200, proof.text);
    known = { agent, userKey, envelopes, v1Token: proof.body.access_token };
    const document = await call(service.url, 'GET', '/openapi.json');
    assert.equal(document.status, 200);
    operations = operationsOf(document.body);
  });
  after(async () => {
    await service.child.stop();
    await database.drop();
  });

  it('finds every operation in the document the service serves', () => {
    assert.ok(operations.length >= 25, `only ${operations.length} operations`);
    assert.ok(operations.some((o) => o.body));
  });

  it('never answers 5xx, and answers every error as JSON with detail', async (t) => {
    for (const operation of operations) {
      await fc.assert(
        fc.asyncProperty(requestFor(operation, known), async (request) => {
          const response = await fetch(service.url + request.path, {
            method: request.method,
            headers: request.headers,
            body: request.body,
          });
          const streaming = (response.headers.get('content-type') ?? '').startsWith(
            'text/event-stream',
          );
          const body = streaming ? await firstChunk(response) : await response.text();
          requests++;
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
          const what = `${request.method} ${request.path} → ${response.status} ${body.slice(0, 300)}`;
          const gateway = operation.gatewayStatuses.includes(response.status);
          if (gateway) gatewayAnswers++;
          assert.ok(response.status < 500 || gateway, what);
          if (response.status >= 400 && request.method !== 'HEAD') {
            assert.match(response.headers.get('content-type') ?? '', /^application\/json/, what);
            const answer = JSON.parse(body) as { detail?: unknown; error?: { message?: unknown } };
            // The MCP and A2A endpoints answer what their protocol names there: a JSON-RPC error.
            const speaksJsonRpc = request.path === '/mcp' || /^\/a2a\/[^/]+$/.test(request.path);
            const detail =
              speaksJsonRpc && answer.detail === undefined ? answer.error?.message : answer.detail;
            assert.ok(typeof detail === 'string' || Array.isArray(detail), what);
          }
        }),
        { numRuns: RUNS_PER_OPERATION },
      );
    }
    const counts = [...statuses].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`);
    t.diagnostic(
      `${requests} requests over ${operations.length} operations (${dialect}); ${counts.join(', ')}; ${gatewayAnswers} of them the proxy's documented 502/504 for an unreachable target`,
    );
  });

  it('holds every MCP tool to its schema: generated arguments answer a result or a tool error in words, never a failure', async () => {
    const headers = {
      authorization: `Bearer ${known.userKey}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
    };
    const rpc = async (extra: Record<string, string>, body: unknown) => {
      const response = await fetch(`${service.url}/mcp`, {
        method: 'POST',
        headers: { ...headers, ...extra },
        body: JSON.stringify(body),
      });
      return { response, answer: (await response.json()) as Record<string, any> };
    };
    const opened = await rpc(
      {},
      {
        jsonrpc: '2.0',
        id: 0,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'fuzz', version: '0' },
        },
      },
    );
    const session = { 'mcp-session-id': opened.response.headers.get('mcp-session-id')! };
    const listed = await rpc(session, { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const tools = listed.answer.result.tools as { name: string; inputSchema: Schema }[];
    assert.ok(tools.length >= 10);
    let id = 1;
    for (const tool of tools) {
      await fc.assert(
        fc.asyncProperty(mostlyShaped(tool.inputSchema, known), async (generated) => {
          // No call may wait long: a chat for a reply, a start for the agent to run.
          const args =
            typeof generated === 'object' && generated !== null && !Array.isArray(generated)
              ? { ...generated, timeout_seconds: 1, wait_seconds: 0 }
              : generated;
          const { response, answer } = await rpc(session, {
            jsonrpc: '2.0',
            id: ++id,
            method: 'tools/call',
            params: { name: tool.name, arguments: args },
          });
          const what = `${tool.name}(${JSON.stringify(args).slice(0, 200)}) → ${response.status} ${JSON.stringify(answer).slice(0, 300)}`;
          requests++;
          assert.ok(response.status < 500, what);
          if (answer.error !== undefined) {
            // Arguments that are not an object at all: the protocol's invalid params.
            assert.equal(answer.error.code, -32602, what);
            return;
          }
          const text = (answer.result.content as { text: string }[])[0]!.text;
          assert.ok(text.length > 0, what);
          assert.doesNotMatch(text, /failed on the server/, what);
        }),
        { numRuns: Math.ceil(RUNS_PER_OPERATION / 2) },
      );
    }
  });

  it('is still up and serving after it all', async () => {
    assert.equal(service.child.hasExited(), false, service.child.output());
    const health = await call(service.url, 'GET', '/health');
    assert.equal(health.status, 200);
    // Nothing failed inside the service (a target agent that cannot be reached is logged too).
    const failures = service.child
      .output()
      .split('\n')
      .filter((line) => line.includes('"level":50'))
      .filter((line) => !/"type":"(BadGatewayError|GatewayTimeoutError)"/.test(line));
    assert.deepEqual(failures, []);
  });
});
