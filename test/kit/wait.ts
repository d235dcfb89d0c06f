import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Waits until `check` holds, looking every `everyMs` milliseconds (5 unless told); fails naming
 * `what` after `timeoutMs` (5000 unless told; a bare number is the timeout). Checks that make
 * HTTP requests or read the database should look less often.
 */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  options: { timeoutMs?: number; everyMs?: number } | number = {},
): Promise<void> {
  const { timeoutMs = 5000, everyMs = 5 } =
    typeof options === 'number' ? { timeoutMs: options } : options;
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}
