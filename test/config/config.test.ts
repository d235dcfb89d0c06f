import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { ConfigError, loadConfig } from '../../src/config/index.js';

describe('verifier threads setting', () => {
  it('leaves one core to the event loop and uses at most two threads by default', () => {
    assert.equal(loadConfig({}, {}).verifierThreads, Math.min(availableParallelism() - 1, 2));
  });

  it('takes AGENTRY_VERIFIER_THREADS, 0 meaning on the event loop', () => {
    assert.equal(loadConfig({}, { AGENTRY_VERIFIER_THREADS: '0' }).verifierThreads, 0);
    assert.equal(loadConfig({}, { AGENTRY_VERIFIER_THREADS: '4' }).verifierThreads, 4);
  });

  it('refuses what is not a whole number', () => {
    assert.throws(
      () => loadConfig({}, { AGENTRY_VERIFIER_THREADS: 'two' }),
      (error) => error instanceof ConfigError && /AGENTRY_VERIFIER_THREADS/.test(error.message),
    );
  });
});

describe('log format setting', () => {
  it('takes AGENTRY_LOG_FORMAT and refuses anything but json or pretty', () => {
    assert.equal(loadConfig({}, { AGENTRY_LOG_FORMAT: 'pretty' }).logFormat, 'pretty');
    assert.equal(loadConfig({}, { AGENTRY_LOG_FORMAT: 'json' }).logFormat, 'json');
    assert.throws(
      () => loadConfig({}, { AGENTRY_LOG_FORMAT: 'xml' }),
      (error) => error instanceof ConfigError && /AGENTRY_LOG_FORMAT/.test(error.message),
    );
  });

  it('writes JSON when stdout is not a terminal, as under a test runner', () => {
    assert.equal(process.stdout.isTTY, undefined);
    assert.equal(loadConfig({}, {}).logFormat, 'json');
  });
});
