import { createHash } from 'node:crypto';

/** The hex SHA-256 of text (as UTF-8) or bytes. */
export function sha256Hex(data: string | Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}
