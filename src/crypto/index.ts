export {
  almanacSignatureCheck,
  almanacSignerAddress,
  almanacSigningBytes,
  verifyAlmanacSignature,
} from './almanac.js';
export type { AlmanacNetworkPrefix, AlmanacSignedFields } from './almanac.js';
export { attestationTimeStatus, parseAttestation, verifyAttestation } from './attestation.js';
export type { AttestationTimeStatus, ParsedAttestation } from './attestation.js';
export { decodeBech32, encodeBech32 } from './bech32.js';
export type { DecodedBech32 } from './bech32.js';
export { DEFAULT_SEPARATORS, pythonJsonDumps } from './canonical-json.js';
export type { PythonJsonSeparators } from './canonical-json.js';
export {
  canonicalUuid,
  envelopeDigest,
  envelopeSigningBytes,
  verifiedEnvelopeDigest,
  verifyEnvelopeSignature,
} from './envelope.js';
export type { EnvelopeFields } from './envelope.js';
export { sha256Hex } from './digests.js';
export { CryptoFormatError, unlessMalformed } from './errors.js';
export { protocolManifestDigest } from './manifest.js';
export type { ProtocolManifestContent } from './manifest.js';
export {
  agentAddressFromPublicKey,
  agentAddressFromSeed,
  decodeSignature,
  encodeSignature,
  isAgentAddress,
  isUserAddress,
  privateKeyFromSeed,
  publicKeyFromAgentAddress,
  userAddressOf,
} from './keys.js';
export {
  bech32SignatureCheck,
  challengeResponseCheck,
  passesCheck,
  verifyBech32Signature,
  verifyChallengeResponse,
} from './signatures.js';
export type { SignatureCheck } from './signatures.js';
export { createDefaultVerifier, createNativeVerifier, createNodeVerifier } from './verifier.js';
export type { SignatureVerifier } from './verifier.js';
export { seal, unseal } from './sealing.js';
export { SigningKey } from './signing.js';
