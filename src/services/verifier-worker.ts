import { parentPort, workerData } from 'node:worker_threads';
import {
  createNativeVerifier,
  createNodeVerifier,
  verifiedEnvelopeDigest,
} from '../crypto/index.js';
import type { VerificationAnswer, VerificationRequest, VerifierKind } from './verifier-pool.js';

/** A thread of the {@link VerifierPool}: checks envelope signatures, one message each. */
const { verifier: kind } = workerData as { verifier: VerifierKind };
const verifier = kind === 'libsecp256k1' ? createNativeVerifier() : createNodeVerifier();

parentPort!.on('message', ({ id, envelope }: VerificationRequest) => {
  const digest = verifiedEnvelopeDigest(verifier, envelope) ?? null;
  const answer: VerificationAnswer = { id, digest };
  parentPort!.postMessage(answer);
});
