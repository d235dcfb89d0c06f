import type { ChatEntryRow, ChatIdentityRow, ChatSessionRow } from '../store/repositories/chat.js';
import type { ChatContent, ChatEntry, ChatIdentity, ChatSession } from '../wire/chat.js';
import { isoTimestamp } from '../wire/common.js';

export function chatIdentityView(row: ChatIdentityRow): ChatIdentity {
  return { address: row.address, created_at: isoTimestamp(row.created_at) };
}

export function chatSessionView(row: ChatSessionRow): ChatSession {
  return {
    id: row.id,
    agent: row.agent,
    identity: row.identity,
    created_at: isoTimestamp(row.created_at),
    updated_at: isoTimestamp(row.updated_at),
    ended_at: row.ended_at === null ? null : isoTimestamp(row.ended_at),
  };
}

/** An entry of a session: what was said, with its text joined for a person to read. */
export function chatEntryView(row: ChatEntryRow): ChatEntry {
  const content = row.content === null ? null : (JSON.parse(row.content) as ChatContent[]);
  const texts = (content ?? []).flatMap((part) => (part.type === 'text' ? [part.text] : []));
  return {
    id: String(row.id),
    session_id: row.session_id,
    at: isoTimestamp(row.at),
    direction: row.direction,
    kind: row.kind,
    msg_id: row.msg_id,
    text: texts.length > 0 ? texts.join('') : null,
    content,
    detail: row.detail,
  };
}
