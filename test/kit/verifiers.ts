import { createNativeVerifier, createNodeVerifier } from '../../src/crypto/index.js';

/** Every signature test runs against both implementations the service may pick at start. */
export const verifiers = [createNativeVerifier(), createNodeVerifier()] as const;
