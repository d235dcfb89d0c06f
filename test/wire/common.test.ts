import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { isoTimestamp } from '../../src/wire/common.js';

/** What Python's `datetime.isoformat()` writes for a UTC moment, from the platform's own formatter. */
function pythonIsoformat(ms: number): string {
  return new Date(ms).toISOString().replace(/Z$/, '000+00:00');
}

describe('isoTimestamp', () => {
  it('writes six fractional digits and +00:00, as Python does', () => {
    assert.equal(
      isoTimestamp(Date.UTC(2026, 10, 24, 9, 5, 7, 42)),
      '2026-11-24T09:05:07.042000+00:00',
    );
    assert.equal(isoTimestamp(0), '1970-01-01T00:00:00.000000+00:00');
    assert.equal(isoTimestamp(-1), '1969-12-31T23:59:59.999000+00:00');
  });

  it('agrees with the full formatter for any moment, whatever was formatted before', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: -62_135_596_800_000, max: 253_402_300_799_999 }), {
          minLength: 1,
          maxLength: 50,
        }),
        fc.integer({ min: 0, max: 5000 }),
        (moments, spread) => {
          // Moments close together share a second, as the messages of one mailbox do.
          for (const ms of moments.flatMap((m) => [m, m + spread, m - spread])) {
            if (ms < -62_135_596_800_000 || ms > 253_402_300_799_999) continue;
            assert.equal(isoTimestamp(ms), pythonIsoformat(ms));
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
