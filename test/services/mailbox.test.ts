import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { encodeBech32 } from '../../src/crypto/index.js';
import { messageUuid } from '../../src/services/mailbox.js';
import { makeEnvelope, TestIdentity } from '../kit/uagent.js';

const UUID4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('message uuid', () => {
  const sender = TestIdentity.random();
  const target = TestIdentity.random().address;
  const envelope = sender.signEnvelope(
    makeEnvelope({ sender: sender.address, target, payloadJson: '{"a":1}', nonce: 7 }),
  );

  it('is a version-4 UUID that the same envelope always gets', () => {
    assert.match(messageUuid(envelope), UUID4);
    assert.equal(messageUuid({ ...envelope }), messageUuid(envelope));
  });

  it('changes with the unsigned fields and the signature', () => {
    const base = messageUuid(envelope);
    assert.notEqual(messageUuid({ ...envelope, protocol_digest: 'proto:x' }), base);
    assert.notEqual(messageUuid({ ...envelope, version: 2 }), base);
    const { signature: _signature, ...content } = envelope;
    assert.notEqual(messageUuid(sender.signEnvelope(content)), base);
  });

  it('tells apart unsigned envelopes whose signing bytes coincide', () => {
    // expires and nonce pack as the same eight bytes, without a marker of which one is there.
    const user = encodeBech32('user', new Uint8Array(32).fill(1));
    const fields = makeEnvelope({ sender: user, target, payloadJson: '{}' });
    assert.notEqual(
      messageUuid({ ...fields, expires: 1_900_000_000, nonce: null }),
      messageUuid({ ...fields, expires: null, nonce: 1_900_000_000 }),
    );
  });
});
