import { Type, type Static } from '@sinclair/typebox';
import { AgentAddress, BoundedInteger, MAX_OFFSET, Timestamp } from './common.js';

/** Characters a URI's user information carries as they are (the client does not decode them). */
export const SEED_PATTERN = '^[A-Za-z0-9._~-]{16,128}$';

export const ProvisionRequest = Type.Object({
  name: Type.String({
    minLength: 1,
    maxLength: 32,
    description: "The agent's public name, the last part of its Agent URI",
  }),
  handle: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 40,
      pattern: '^[a-z0-9]+(-[a-z0-9]+)*$',
      description:
        'The handle the agent registers with (lower-case letters and digits in dash-separated words); absent: made from the name',
    }),
  ),
  seed: Type.Optional(
    Type.String({
      pattern: SEED_PATTERN,
      description:
        "A key (seed) of the caller's own, 16 to 128 letters, digits, '.', '_', '~' or '-'; absent: Agentry makes one. It is never stored",
    }),
  ),
});
export type ProvisionRequest = Static<typeof ProvisionRequest>;

export const Enrolment = Type.Object({
  address: Type.String({ description: 'The enrolled agent address' }),
  name: Type.String(),
  handle: Type.String(),
  created_at: Timestamp,
});
export type Enrolment = Static<typeof Enrolment>;

export const EnrolmentList = Type.Array(Enrolment);

export const ProvisionedAgent = Type.Object({
  ...Enrolment.properties,
  agent_uri: Type.String({
    description:
      'https://<handle>:<key>@<host>/<name>, for the agentverse-sdk; it holds the agent key and is shown this once only',
  }),
});
export type ProvisionedAgent = Static<typeof ProvisionedAgent>;

export const ENROLMENTS_PAGE_SIZE = 100;

export const EnrolmentListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: ENROLMENTS_PAGE_SIZE })),
  offset: Type.Optional(BoundedInteger({ maximum: MAX_OFFSET, default: 0 })),
});

export const EnrolmentParams = Type.Object({ address: AgentAddress });
