import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { isPrivateAddress } from '../../src/infra/outbound.js';

describe('private-network guard', () => {
  for (const address of [
    '127.0.0.1',
    '127.1.2.3',
    '10.20.30.40',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '100.100.100.200',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    '[::1]',
    'fe80::1',
    'fe80::1%eth0',
    'fd00:ec2::254',
    'fc00::1',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::127.0.0.1',
    '[::7f00:1]',
    '::10.0.0.1',
    '0:0:0:0:0:ffff:a9fe:a9fe',
    '64:ff9b::10.0.0.1',
    '64:ff9b::a9fe:a9fe',
    '2002:c0a8:0101::1',
  ]) {
    it(`counts ${address} as private`, () => assert.equal(isPrivateAddress(address), true));
  }

  for (const address of [
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '64:ff9b::8.8.8.8',
    '2002:0808:0808::1',
    'example.com',
  ]) {
    it(`counts ${address} as public`, () => assert.equal(isPrivateAddress(address), false));
  }
});
