import { Type } from '@sinclair/typebox';
import { AgentHandle } from './agents.js';
import { Nullable } from './common.js';

// The handles API of the Almanac (v1 by name, v2 by handle), as api-clients' almanac client
// sends and reads it.

const NAME_MAX_LENGTH = 200;

export const HandleAvailabilityRequest = Type.Object({
  name: Type.String({
    minLength: 1,
    maxLength: NAME_MAX_LENGTH,
    description: 'a name or a handle: its letters and digits make the handle asked about',
  }),
});

export const HandleAvailability = Type.Object({
  available: Type.Boolean({ description: 'whether registration would accept the handle' }),
  handle: Type.String({ description: 'the handle asked about' }),
  alternative: Nullable(
    Type.String({ description: 'a free handle made from it, when it is taken' }),
  ),
});

export const HandleParams = Type.Object({ handle: AgentHandle });

export const HandleBaseParams = Type.Object({
  handle: Type.String({
    minLength: 1,
    // The router refuses a longer path segment (414).
    maxLength: 100,
    description: 'the name to make a handle from',
  }),
});

export const GeneratedHandle = Type.Object({
  handle: Type.String({ description: 'a free handle, made from the name' }),
});
