import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { protocolManifestDigest } from '../../src/crypto/index.js';

const fixtures = JSON.parse(
  readFileSync(new URL('../fixtures/uagents-manifests.json', import.meta.url), 'utf8'),
);

describe('protocolManifestDigest', () => {
  const greeter = fixtures.greeter;

  it('gives the digest uagents-core computed for a real protocol manifest', () => {
    assert.equal(protocolManifestDigest(greeter), greeter.metadata.digest);
  });

  it('does not depend on the order of models and interactions', () => {
    const reordered = {
      ...greeter,
      models: [...greeter.models].reverse(),
      interactions: [...greeter.interactions].reverse(),
    };
    assert.equal(protocolManifestDigest(reordered), greeter.metadata.digest);
  });

  it('changes when a model schema changes', () => {
    const [first, ...rest] = greeter.models;
    const altered = {
      ...greeter,
      models: [{ ...first, schema: { ...first.schema, title: 'Other' } }, ...rest],
    };
    assert.notEqual(protocolManifestDigest(altered), greeter.metadata.digest);
  });

  it('cannot reproduce the digest of a manifest whose integral float JSON.parse turned into an integer', () => {
    const thermo = fixtures.thermo;
    assert.equal(thermo.models[0].schema.properties.celsius.default, 20);
    assert.notEqual(protocolManifestDigest(thermo), thermo.metadata.digest);
  });
});
