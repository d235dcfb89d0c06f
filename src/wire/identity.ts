import { Type, type Static } from '@sinclair/typebox';
import { AgentAddress } from './common.js';

export const ChallengeResponse = Type.Object({ challenge: Type.String() });

export const IdentityProof = Type.Object({
  address: AgentAddress,
  challenge: Type.String(),
  challenge_response: Type.String({ description: 'bech32 "sig1…" signature of the challenge' }),
});
export type IdentityProof = Static<typeof IdentityProof>;

export const IdentityProven = Type.Object({ address: Type.String() });
