import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  almanacSignerAddress,
  almanacSigningBytes,
  CryptoFormatError,
  encodeBech32,
  pythonJsonDumps,
  verifyAlmanacSignature,
  type AlmanacSignedFields,
} from '../../src/crypto/index.js';
import { TestIdentity } from '../kit/uagent.js';
import { identityVector } from '../kit/vectors.js';
import { verifiers } from '../kit/verifiers.js';

const { address } = identityVector('alice');

describe('almanacSignerAddress', () => {
  const identifiers: [string, 'agent' | 'test-agent' | null][] = [
    [address, null],
    [`agent://${address}`, 'agent'],
    [`test-agent://${address}`, 'test-agent'],
    [`agent://my-agent/${address}`, 'agent'],
    [`my-agent/${address}`, null],
  ];
  for (const [identifier, prefix] of identifiers) {
    it(`finds the signer of ${identifier.replace(address, '<address>')}`, () => {
      assert.deepEqual(almanacSignerAddress(identifier), { prefix, address });
    });
  }

  const malformed: Record<string, string> = {
    'another network prefix': `mainnet://${address}`,
    'a name without an address': 'agent://my-agent',
    'a user address': `agent://${encodeBech32('user', new Uint8Array(32))}`,
    'an empty identifier': '',
  };
  for (const [what, identifier] of Object.entries(malformed)) {
    it(`rejects ${what}`, () => {
      assert.throws(() => almanacSignerAddress(identifier), CryptoFormatError);
    });
  }
});

describe('almanacSigningBytes', () => {
  it('is the UTF-8 of the Python JSON dump', () => {
    const fields = {
      agent_identifier: address,
      is_active: true,
      timestamp: 1_790_000_000,
      note: 'é',
    };
    assert.equal(
      Buffer.from(almanacSigningBytes(fields)).toString('utf8'),
      pythonJsonDumps(fields),
    );
  });
});

describe('almanac registration bytes', () => {
  it('are what CPython dumps for the pydantic AgentRegistrationAttestation', () => {
    // The body as uAgents sends it, minus the signature; the expected text is
    // json.dumps(model.model_dump(exclude={"signature"}), sort_keys=True, separators=(",", ":"))
    // of that model validated by pydantic.
    const fields = {
      agent_identifier:
        'test-agent://agent1qv2l7qzcd2g2rcv2p93tqflrcaq5dk7c2xuzd7jg6sgq3zpcchmdz5y4l8y',
      timestamp: 1_790_000_000,
      protocols: ['proto:a03398ea81d7aaaf67e72940937676eae0d019f8e1d8b5efbadfef9fd2e98bb2'],
      endpoints: [
        { url: 'http://127.0.0.1:8000/v2/agents/mailbox/submit', weight: 1 },
        { url: 'https://b.example/submit', weight: 3 },
      ],
      metadata: {
        name: 'Zoë’s agent 🤖',
        geolocation: { city: 'Zürich', latitude: '47.37' },
        tags: ['日本', 'b'],
      },
    };
    assert.equal(
      Buffer.from(almanacSigningBytes(fields)).toString('utf8'),
      '{"agent_identifier":"test-agent://agent1qv2l7qzcd2g2rcv2p93tqflrcaq5dk7c2xuzd7jg6sgq3zpcchmdz5y4l8y",' +
        '"endpoints":[{"url":"http://127.0.0.1:8000/v2/agents/mailbox/submit","weight":1},' +
        '{"url":"https://b.example/submit","weight":3}],' +
        '"metadata":{"geolocation":{"city":"Z\\u00fcrich","latitude":"47.37"},' +
        '"name":"Zo\\u00eb\\u2019s agent \\ud83e\\udd16","tags":["\\u65e5\\u672c","b"]},' +
        '"protocols":["proto:a03398ea81d7aaaf67e72940937676eae0d019f8e1d8b5efbadfef9fd2e98bb2"],' +
        '"timestamp":1790000000}',
    );
  });
});

function signRegistration(identity: TestIdentity, agentIdentifier: string): AlmanacSignedFields {
  const fields = {
    agent_identifier: agentIdentifier,
    protocols: ['proto:4096274c5918aad2684d80cf6e4fe8d0a425bcf101f36619cf44a252cd6e5d16'],
    endpoints: [{ url: 'https://agent.example/submit', weight: 1 }],
    metadata: { name: 'café' },
    timestamp: 1_790_000_000,
  };
  return { ...fields, signature: identity.sign(almanacSigningBytes(fields)) };
}

for (const verifier of verifiers) {
  describe(`verifyAlmanacSignature with ${verifier.kind}`, () => {
    const identity = TestIdentity.random();

    it('accepts a registration signed by the agent its identifier names', () => {
      const signed = signRegistration(identity, `test-agent://${identity.address}`);
      assert.equal(verifyAlmanacSignature(verifier, signed), true);
    });

    it('rejects a registration whose fields changed after signing', () => {
      const signed = signRegistration(identity, identity.address);
      assert.equal(
        verifyAlmanacSignature(verifier, { ...signed, timestamp: 1_790_000_001 }),
        false,
      );
      assert.equal(verifyAlmanacSignature(verifier, { ...signed, metadata: null }), false);
    });

    it('rejects a registration signed by another agent than the identifier names', () => {
      const signed = signRegistration(TestIdentity.random(), identity.address);
      assert.equal(verifyAlmanacSignature(verifier, signed), false);
    });

    it('returns false, without throwing, for a missing signature or unusable identifier', () => {
      const signed = signRegistration(identity, identity.address);
      assert.equal(verifyAlmanacSignature(verifier, { ...signed, signature: null }), false);
      const elsewhere = { ...signed, agent_identifier: `mainnet://${identity.address}` };
      assert.equal(verifyAlmanacSignature(verifier, elsewhere), false);
      assert.equal(verifyAlmanacSignature(verifier, { ...signed, extra: undefined }), false);
    });
  });
}
