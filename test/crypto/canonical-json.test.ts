import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CryptoFormatError, DEFAULT_SEPARATORS, pythonJsonDumps } from '../../src/crypto/index.js';

// Expected strings are what CPython prints for
// json.dumps(value, sort_keys=True, separators=(",", ":")).
describe('pythonJsonDumps', () => {
  it('sorts keys at every depth and prints no spaces', () => {
    const value = { b: [1, { d: null, c: true }], a: 'x', nested: { z: { y: [], x: {} } } };
    assert.equal(
      pythonJsonDumps(value),
      '{"a":"x","b":[1,{"c":true,"d":null}],"nested":{"z":{"x":{},"y":[]}}}',
    );
  });

  it('keeps null members and array order', () => {
    assert.equal(
      pythonJsonDumps({ metadata: null, list: [3, 1, 2] }),
      '{"list":[3,1,2],"metadata":null}',
    );
  });

  it('escapes non-ASCII as lower-case \\uXXXX, astral characters as surrogate pairs', () => {
    assert.equal(
      pythonJsonDumps(['café', '日本', '😀']),
      '["caf\\u00e9","\\u65e5\\u672c","\\ud83d\\ude00"]',
    );
  });

  it('escapes quotes, backslashes and control characters like Python, but not the slash', () => {
    assert.equal(
      pythonJsonDumps('\n\r\t\b\f\u0000\u001f\u007f"\\/ ~'),
      '"\\n\\r\\t\\b\\f\\u0000\\u001f\\u007f\\"\\\\/ ~"',
    );
    assert.equal(pythonJsonDumps('\u2028'), '"\\u2028"');
  });

  it('orders keys by code point, so an astral key sorts after U+FF61', () => {
    const value = { z: 0, é: 1, '\uff61': 2, '😀': 3, A: 4, a: 5, aa: 6, '': 7 };
    assert.equal(
      pythonJsonDumps(value),
      '{"":7,"A":4,"a":5,"aa":6,"z":0,"\\u00e9":1,"\\uff61":2,"\\ud83d\\ude00":3}',
    );
  });

  it('escapes non-ASCII keys and values at depth', () => {
    assert.equal(pythonJsonDumps({ é: { ü: 'ß' } }), '{"\\u00e9":{"\\u00fc":"\\u00df"}}');
  });

  it('prints integers as integers and floats as Python repr does', () => {
    assert.equal(
      pythonJsonDumps([0, -5, 1.5, 0.0001, 0.00001, 1.5e-7, -2.5e-10, 123.456, 0.1, 0.00012345]),
      '[0,-5,1.5,0.0001,1e-05,1.5e-07,-2.5e-10,123.456,0.1,0.00012345]',
    );
  });

  it('prints a float with an integral value as an integer, since JSON.parse erased the .0', () => {
    assert.equal(pythonJsonDumps(JSON.parse('[1.0, 2]')), '[1,2]');
  });

  it('reproduces a registration as uAgents signs it', () => {
    const registration = {
      timestamp: 1_790_000_000,
      protocols: ['proto:ab'],
      metadata: null,
      endpoints: [{ weight: 1, url: 'https://example.com/submit' }],
      agent_identifier: 'agent://agent1qgxz',
    };
    assert.equal(
      pythonJsonDumps(registration),
      '{"agent_identifier":"agent://agent1qgxz","endpoints":[{"url":"https://example.com/submit","weight":1}],"metadata":null,"protocols":["proto:ab"],"timestamp":1790000000}',
    );
  });

  it("prints Python's default separators when given them, at every depth", () => {
    assert.equal(
      pythonJsonDumps({ b: [1, { d: null, c: 'é' }], a: {} }, DEFAULT_SEPARATORS),
      '{"a": {}, "b": [1, {"c": "\\u00e9", "d": null}]}',
    );
  });

  const unrepresentable: Record<string, unknown> = {
    undefined: undefined,
    'a member set to undefined': { a: undefined },
    NaN: Number.NaN,
    Infinity: Number.POSITIVE_INFINITY,
    'an integer beyond 2^53': 2 ** 53,
    'a bigint': 1n,
    'a Date': new Date(0),
    'a function': () => 1,
  };
  for (const [what, value] of Object.entries(unrepresentable)) {
    it(`refuses ${what}`, () => {
      assert.throws(() => pythonJsonDumps(value), CryptoFormatError);
    });
  }
});
