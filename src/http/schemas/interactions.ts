import { Type } from '@sinclair/typebox';
import { AgentAddress } from './common.js';

export const Interaction = Type.Object({
  source: AgentAddress,
  target: AgentAddress,
  session_id: Type.String({ description: 'UUID of the session' }),
});
