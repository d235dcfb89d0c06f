/** A crypto input that does not have the shape the protocol defines (PROTOCOL.md). */
export class CryptoFormatError extends Error {
  override readonly name = 'CryptoFormatError';
}

/**
 * Runs a parser and turns a {@link CryptoFormatError} into `undefined`, for verifiers that
 * answer "not valid" to malformed input instead of throwing. Other errors are bugs and
 * propagate.
 */
export function unlessMalformed<T>(parse: () => T): T | undefined {
  try {
    return parse();
  } catch (error) {
    if (error instanceof CryptoFormatError) return undefined;
    throw error;
  }
}
