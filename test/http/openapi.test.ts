import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { call } from '../kit/http.js';
import { startTestServer, type TestServer } from '../kit/server.js';

const openapiFixture = new URL('../fixtures/openapi.json', import.meta.url);

describe('OpenAPI document', () => {
  let t: TestServer;
  before(async () => {
    t = await startTestServer();
  });
  after(() => t.close());

  it('serves an OpenAPI 3.1 document and a docs page', async () => {
    const spec = await call(t.url, 'GET', '/openapi.json');
    assert.equal(spec.status, 200);
    assert.equal(spec.body.openapi, '3.1.0');
    assert.ok(spec.body.paths['/v2/identity']);
    const docs = await fetch(`${t.url}/docs/`);
    assert.equal(docs.status, 200);
    assert.match(await docs.text(), /<html/i);
  });

  it('brands the docs page and loads nothing from elsewhere', async () => {
    const docs = await fetch(`${t.url}/docs/`);
    const html = await docs.text();
    assert.match(html, /<title>Agentry API<\/title>/);
    assert.doesNotMatch(html, /favicon-32x32\.png/);
    const icon = /<link rel="icon" type="image\/svg\+xml" href="([^"]+)"/.exec(html);
    assert.ok(icon, html);
    const favicon = await fetch(new URL(icon[1]!, `${t.url}/docs/`));
    assert.equal(favicon.status, 200);
    assert.equal(favicon.headers.get('content-type'), 'image/svg+xml');
    const css = /href="([^"]*theme\/agentry\.css)"/.exec(html);
    assert.ok(css, html);
    assert.match(await (await fetch(new URL(css[1]!, `${t.url}/docs/`))).text(), /#16213a/);
    const initializer = await (await fetch(`${t.url}/docs/static/swagger-initializer.js`)).text();
    assert.match(initializer, /data:image\/svg\+xml;base64,/);
    assert.match(initializer, /validatorUrl: null/);
    const csp = docs.headers.get('content-security-policy') ?? '';
    assert.doesNotMatch(csp, /https:|swagger\.io|upgrade-insecure-requests/);
  });

  it('bounds every number a request takes, so that none reaches the store unchecked', async () => {
    const spec = (await call(t.url, 'GET', '/openapi.json')).body as OpenApiDocument;
    const unbounded: string[] = [];
    for (const [path, operations] of Object.entries(spec.paths)) {
      for (const [method, operation] of Object.entries(operations)) {
        for (const parameter of operation.parameters ?? []) {
          unboundedNumbers(
            spec,
            parameter.schema,
            `${method} ${path} ${parameter.in}.${parameter.name}`,
            unbounded,
          );
        }
        for (const content of Object.values(operation.requestBody?.content ?? {})) {
          unboundedNumbers(spec, content.schema, `${method} ${path} body`, unbounded);
        }
      }
    }
    assert.ok(Object.keys(spec.paths).length > 20);
    assert.deepEqual(unbounded, []);
  });

  it('keeps the generated OpenAPI document in step with the committed one', async () => {
    const spec = (await call(t.url, 'GET', '/openapi.json')).body;
    const generated = JSON.stringify(spec, null, 2) + '\n';
    if (process.env.UPDATE_OPENAPI === '1') writeFileSync(openapiFixture, generated);
    assert.equal(
      generated,
      readFileSync(openapiFixture, 'utf8'),
      'the API changed: review it, then run UPDATE_OPENAPI=1 npm test to accept',
    );
  });
});

interface JsonSchema {
  $ref?: string;
  type?: string | string[];
  minimum?: number;
  exclusiveMinimum?: number;
  maximum?: number;
  exclusiveMaximum?: number;
  properties?: Record<string, JsonSchema>;
  patternProperties?: Record<string, JsonSchema>;
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
}

interface OpenApiDocument {
  paths: Record<
    string,
    Record<
      string,
      {
        parameters?: { in: string; name: string; schema?: JsonSchema }[];
        requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
      }
    >
  >;
  components?: { schemas?: Record<string, JsonSchema> };
}

/** Collects, under `where`, every integer or number in the schema without both bounds. */
function unboundedNumbers(
  spec: OpenApiDocument,
  schema: JsonSchema | undefined,
  where: string,
  found: string[],
  seen = new Set<string>(),
): void {
  if (!schema) return;
  if (schema.$ref) {
    if (seen.has(schema.$ref)) return;
    const name = schema.$ref.replace('#/components/schemas/', '');
    const target = spec.components?.schemas?.[name];
    assert.ok(target, `${where}: ${schema.$ref} resolves`);
    unboundedNumbers(spec, target, where, found, new Set([...seen, schema.$ref]));
    return;
  }
  const types = ([] as string[]).concat(schema.type ?? []);
  if (types.includes('integer') || types.includes('number')) {
    const low = schema.minimum ?? schema.exclusiveMinimum;
    const high = schema.maximum ?? schema.exclusiveMaximum;
    if (low === undefined || high === undefined) found.push(where);
  }
  const children: [string, JsonSchema | undefined][] = [
    ...Object.entries(schema.properties ?? {}).map(([key, value]): [string, JsonSchema] => [
      `.${key}`,
      value,
    ]),
    ...Object.entries(schema.patternProperties ?? {}).map(([key, value]): [string, JsonSchema] => [
      `[${key}]`,
      value,
    ]),
    ['[]', schema.items],
    [
      '{}',
      typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined,
    ],
    ...[...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])].map(
      (branch, index): [string, JsonSchema] => [`|${index}`, branch],
    ),
  ];
  for (const [step, child] of children) unboundedNumbers(spec, child, where + step, found, seen);
}
