import { Type, type Static } from '@sinclair/typebox';
import { Nullable } from './common.js';

export const SignInRequest = Type.Object({
  api_key: Type.String({ minLength: 1, maxLength: 200, description: 'An API key of the user' }),
});

export const SessionInfo = Type.Object({
  user: Type.Object({ id: Type.String(), name: Type.String() }),
  expires_at: Nullable(
    Type.String({
      format: 'date-time',
      description: 'End of the session; null when the call was made with an API key',
    }),
  ),
});
export type SessionInfo = Static<typeof SessionInfo>;
