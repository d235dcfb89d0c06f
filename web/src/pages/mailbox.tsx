import { bytes, encode, type AgentRecord, type StoredEnvelope } from '../api';
import { AgentRef, Moment } from '../widgets';
import { DeliveryTrace } from './deliveries';

/** A payload's text: base64-decoded UTF-8, or as it is when it is not base64. */
function payloadText(payload: string | null | undefined): string {
  if (!payload) return '';
  try {
    const bin = atob(payload);
    return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
  } catch {
    return payload;
  }
}

/** The agent page's mailbox: the messages waiting for the agent, each with its trace. */
export function Mailbox(props: {
  agent: AgentRecord;
  /** The agent's API path, `/v2/agents/{address}`. */
  path: string;
  messages: StoredEnvelope[] | undefined;
  error: string | undefined;
  onDelete: (uuid: string) => void;
}) {
  const { agent: a, messages } = props;
  return (
    <section class="card">
      <h2>Mailbox</h2>
      <p>
        {a.mailbox.pending_messages} pending, {bytes(a.mailbox.bytes_stored)} stored
      </p>
      {props.error && <p class="error">{props.error}</p>}
      {messages && messages.length > 0 && (
        <table data-testid="messages">
          <thead>
            <tr>
              <th>Received</th>
              <th>From</th>
              <th>Payload</th>
              <th>Expires</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {messages.map((m) => (
              <tr key={m.uuid}>
                <td>
                  <Moment iso={m.received_at} never="" />
                </td>
                <td>
                  <AgentRef address={m.envelope.sender} />
                </td>
                <td>
                  <code>{payloadText(m.envelope.payload).slice(0, 200)}</code>
                </td>
                <td>
                  <Moment iso={m.expires_at} never="" />
                </td>
                <td>
                  <DeliveryTrace path={`${props.path}/deliveries/${encode(m.uuid)}`} />{' '}
                  <button type="button" class="secondary" onClick={() => props.onDelete(m.uuid)}>
                    Delete
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
