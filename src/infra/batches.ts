/**
 * Runs `batch`, which removes at most `size` rows and says how many it removed, until one
 * comes back short or `maxBatches` have run: each batch is its own short transaction, so a
 * large clean-up never holds writers up for long. Resolves to the rows removed in all.
 */
export async function inBatches(
  size: number,
  maxBatches: number,
  batch: () => Promise<number>,
): Promise<number> {
  let removed = 0;
  for (let run = 0; run < maxBatches; run++) {
    const count = await batch();
    removed += count;
    if (count < size) break;
  }
  return removed;
}
