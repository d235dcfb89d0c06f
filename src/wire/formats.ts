import { almanacSignerAddress, canonicalUuid, isAgentAddress } from '../crypto/index.js';
import type { ValidationIssue } from '../errors.js';

/**
 * Formats of text values on the wire, named in the schemas as `format` and enforced by the
 * validation plugin before any handler runs. A value in a format with a canonical spelling is
 * rewritten to it in place (an upper-case address becomes lower-case), so that everything
 * past the edge sees one spelling. Values that are covered by a signature (envelope fields,
 * Almanac identifiers) use formats without a canonical spelling: they are checked and kept
 * exactly as sent.
 */
export interface WireFormat {
  /** The value in its canonical spelling, or undefined when it is not in this format. */
  canonical(value: string): string | undefined;
  /** Whether a valid value is rewritten to {@link canonical}'s answer. */
  rewrite: boolean;
  /** The 422 item (without `loc` and `input`) for a value that is not in this format. */
  issue(value: string): Omit<ValidationIssue, 'loc' | 'input'>;
}

export const ADDRESS_MESSAGE =
  'Value error, not a valid agent address (bech32 "agent1…" of a compressed secp256k1 key)';

const IDENTIFIER_MESSAGE =
  'Value error, agent_identifier must be agent://<agent address>, test-agent://<agent address> or an agent address';

const notAUuid = {
  msg: 'Input should be a valid UUID, unable to parse string as a UUID',
  type: 'uuid_parsing',
};

function unlessThrows(make: () => string): string | undefined {
  try {
    return make();
  } catch {
    return undefined;
  }
}

const uuid = (value: string) => unlessThrows(() => canonicalUuid(value));

export const wireFormats = {
  /** bech32 `agent1…` of a compressed secp256k1 key; canonical in lower case. */
  'agent-address': {
    canonical: (value) => (isAgentAddress(value) ? value.toLowerCase() : undefined),
    rewrite: true,
    issue: () => ({ msg: ADDRESS_MESSAGE, type: 'value_error' }),
  },
  /** A UUID in any spelling pydantic parses; canonical lower-case and hyphenated. */
  uuid: {
    canonical: uuid,
    rewrite: true,
    issue: () => notAUuid,
  },
  /**
   * A version-4 UUID, kept as sent (an envelope's `session` is signed): uAgents declares it a
   * UUID4 and drops a whole mailbox page when one item fails to parse.
   */
  uuid4: {
    canonical: (value) => (uuid(value)?.[14] === '4' ? value : undefined),
    rewrite: false,
    issue: (value) =>
      uuid(value) === undefined
        ? notAUuid
        : { msg: 'UUID version 4 expected', type: 'uuid_version', ctx: { expected_version: 4 } },
  },
  /** `agent://<address>`, `test-agent://<address>`, `prefix://name/address` or an address. */
  'almanac-identifier': {
    canonical: (value) => unlessThrows(() => (almanacSignerAddress(value), value)),
    rewrite: false,
    issue: () => ({ msg: IDENTIFIER_MESSAGE, type: 'value_error' }),
  },
} satisfies Record<string, WireFormat>;

export type WireFormatName = keyof typeof wireFormats;

/** The canonical spelling of an agent address, or undefined (for values outside a schema). */
export function canonicalAgentAddress(value: string): string | undefined {
  return wireFormats['agent-address'].canonical(value);
}
