import { parentPort, workerData } from 'node:worker_threads';
import {
  createNativeVerifier,
  createNodeVerifier,
  passesCheck,
  verifiedEnvelopeDigest,
} from '../crypto/index.js';
import type { VerificationAnswer, VerificationRequest, VerifierKind } from './verifier-pool.js';

/** A thread of the {@link VerifierPool}: checks one signature per message. */
const { verifier: kind } = workerData as { verifier: VerifierKind };
const verifier = kind === 'libsecp256k1' ? createNativeVerifier() : createNodeVerifier();

parentPort!.on('message', (request: VerificationRequest) => {
  const answer: VerificationAnswer =
    'envelope' in request
      ? { id: request.id, digest: verifiedEnvelopeDigest(verifier, request.envelope) ?? null }
      : { id: request.id, valid: passesCheck(verifier, request.check) };
  parentPort!.postMessage(answer);
});
