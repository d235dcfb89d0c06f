import { pythonJsonDumps } from './canonical-json.js';
import { CryptoFormatError, unlessMalformed } from './errors.js';
import { isAgentAddress, signerKeyFromAgentAddress } from './keys.js';
import { bech32SignatureCheck, passesCheck, type SignatureCheck } from './signatures.js';
import type { SignatureVerifier } from './verifier.js';

/**
 * A signed Almanac model (`AgentRegistrationAttestation`, `AgentStatusUpdate`): every field the
 * Python model dumps, optional ones present as `null`, plus the signature over the rest.
 */
export interface AlmanacSignedFields {
  agent_identifier: string;
  signature?: string | null;
  [field: string]: unknown;
}

export type AlmanacNetworkPrefix = 'agent' | 'test-agent';

/** PROTOCOL.md §6: utf8 of Python's sorted, compact `json.dumps` of every field but `signature`. */
export function almanacSigningBytes(fieldsWithoutSignature: Record<string, unknown>): Uint8Array {
  return Buffer.from(pythonJsonDumps(fieldsWithoutSignature), 'utf8');
}

/**
 * The signer named by `agent_identifier`, which uAgents writes as a bare address,
 * `agent://address`, `test-agent://address` or `prefix://name/address`. Throws
 * {@link CryptoFormatError} when no agent address is found or the prefix is another network's.
 */
export function almanacSignerAddress(agentIdentifier: string): {
  prefix: AlmanacNetworkPrefix | null;
  address: string;
} {
  let prefix: AlmanacNetworkPrefix | null = null;
  let rest = agentIdentifier;
  const schemeEnd = rest.indexOf('://');
  if (schemeEnd !== -1) {
    const scheme = rest.slice(0, schemeEnd);
    if (scheme !== 'agent' && scheme !== 'test-agent') {
      throw new CryptoFormatError(`agent identifier prefix '${scheme}' is not agent or test-agent`);
    }
    prefix = scheme;
    rest = rest.slice(schemeEnd + '://'.length);
  }
  const nameEnd = rest.indexOf('/');
  const address = nameEnd === -1 ? rest : rest.slice(nameEnd + 1);
  if (!isAgentAddress(address)) {
    throw new CryptoFormatError('agent identifier does not end in an agent address');
  }
  return { prefix, address };
}

/**
 * True only when `signature` is a valid signature, by the agent the identifier names, over all
 * the other fields. Malformed identifiers, fields or signatures are `false`.
 */
export function verifyAlmanacSignature(
  verifier: SignatureVerifier,
  signed: AlmanacSignedFields,
): boolean {
  return passesCheck(verifier, almanacSignatureCheck(signed));
}

/** The check {@link verifyAlmanacSignature} runs; undefined when an input is malformed. */
export function almanacSignatureCheck(signed: AlmanacSignedFields): SignatureCheck | undefined {
  const { signature, ...fields } = signed;
  if (signature == null) return undefined;
  const publicKey = unlessMalformed(() =>
    signerKeyFromAgentAddress(almanacSignerAddress(signed.agent_identifier).address),
  );
  const message = unlessMalformed(() => almanacSigningBytes(fields));
  return publicKey === undefined || message === undefined
    ? undefined
    : bech32SignatureCheck(message, signature, publicKey);
}
