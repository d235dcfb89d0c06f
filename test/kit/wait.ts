import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Waits until `check` holds, looking every few milliseconds; fails naming `what` after
 * `timeoutMs`.
 */
export async function until(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 5000,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}
