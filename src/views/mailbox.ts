import type { PendingMessage, QuarantinedMessage } from '../store/repositories/mailbox.js';
import { isoTimestamp } from '../wire/common.js';
import type { QuarantinedEnvelope } from '../wire/mailbox.js';

/**
 * A stored message as the StoredEnvelope JSON text. The envelope is JSON text already: it is
 * spliced into the answer rather than parsed and serialised again on every poll.
 */
export function storedEnvelopeJson(message: PendingMessage): string {
  return `{"uuid":"${message.uuid}","envelope":${message.envelope},"received_at":"${isoTimestamp(message.received_at)}","expires_at":"${isoTimestamp(message.expires_at)}"}`;
}

export function quarantinedEnvelopeView(message: QuarantinedMessage): QuarantinedEnvelope {
  return {
    uuid: message.uuid,
    reason: message.reason,
    envelope: message.envelope,
    received_at: isoTimestamp(Number(message.received_at)),
    expires_at: isoTimestamp(Number(message.expires_at)),
    quarantined_at: isoTimestamp(Number(message.quarantined_at)),
  };
}
