import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { CryptoFormatError } from './errors.js';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * Seals a secret with AES-256-GCM under a 32-byte key: `v1.<iv>.<tag>.<ciphertext>`, each part
 * base64url. `context` (the row the secret belongs to) is authenticated with it, so that a
 * sealed value copied to another row does not open there.
 */
export function seal(key: Uint8Array, plaintext: string, context: string): string {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  const parts = [iv, cipher.getAuthTag(), ciphertext].map((part) => part.toString('base64url'));
  return [VERSION, ...parts].join('.');
}

/**
 * Opens what {@link seal} made with the same key and context; throws CryptoFormatError when
 * the text is not a sealed value, or the key or the context is not the one it was sealed with.
 */
export function unseal(key: Uint8Array, sealed: string, context: string): string {
  const parts = sealed.split('.');
  if (parts.length !== 4 || parts[0] !== VERSION) {
    throw new CryptoFormatError('not a sealed value');
  }
  const [iv, tag, ciphertext] = parts.slice(1).map((part) => Buffer.from(part, 'base64url'));
  if (iv!.length !== IV_BYTES || tag!.length !== TAG_BYTES) {
    throw new CryptoFormatError('not a sealed value');
  }
  const decipher = createDecipheriv('aes-256-gcm', key, iv!, { authTagLength: TAG_BYTES });
  decipher.setAAD(Buffer.from(context, 'utf8'));
  decipher.setAuthTag(tag!);
  try {
    return Buffer.concat([decipher.update(ciphertext!), decipher.final()]).toString('utf8');
  } catch {
    throw new CryptoFormatError('sealed with another key, or for another row');
  }
}
