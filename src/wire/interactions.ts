import { Type, type Static } from '@sinclair/typebox';
import { AgentAddress, WireString } from './common.js';

export const Interaction = Type.Object({
  source: AgentAddress,
  target: AgentAddress,
  session_id: WireString('uuid', { description: 'UUID of the session' }),
});
export type Interaction = Static<typeof Interaction>;
