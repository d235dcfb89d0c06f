import type { McpSessionRow } from '../store/repositories/mcp-sessions.js';
import { isoTimestamp } from '../wire/common.js';
import type { McpSession } from '../wire/mcp.js';

export function mcpSessionView(row: McpSessionRow): McpSession {
  return {
    id: row.id,
    client_name: row.client_name,
    client_version: row.client_version,
    protocol_version: row.protocol_version,
    key_id: row.key_id,
    created_at: isoTimestamp(row.created_at),
    last_seen_at: isoTimestamp(row.last_seen_at),
  };
}
