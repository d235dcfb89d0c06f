import { randomUUID } from 'node:crypto';
import type { Role } from '@a2a-js/sdk';
import { type Message, type Part } from '@a2a-js/sdk';

/**
 * The A2A message pieces Agentry makes and reads (the SDK's protocol objects, whose every
 * field must be given): a text or file part, a message of them, the text of a message.
 */

export function textPart(text: string): Part {
  return {
    content: { $case: 'text', value: text },
    metadata: undefined,
    filename: '',
    mediaType: 'text/plain',
  };
}

export function filePart(uri: string): Part {
  return {
    content: { $case: 'url', value: uri },
    metadata: undefined,
    filename: '',
    mediaType: '',
  };
}

/** A message of `role` with these parts, in the context (and task) given; a new id. */
export function a2aMessage(
  role: Role.ROLE_USER | Role.ROLE_AGENT,
  parts: Part[],
  where: { contextId?: string; taskId?: string } = {},
): Message {
  return {
    messageId: randomUUID(),
    contextId: where.contextId ?? '',
    taskId: where.taskId ?? '',
    role,
    parts,
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

/** The text parts' text, joined by `separator`; other parts say nothing here. */
export function textOfParts(parts: readonly Part[] | undefined, separator = ''): string {
  return (parts ?? [])
    .flatMap((part) => (part.content?.$case === 'text' ? [part.content.value] : []))
    .join(separator);
}
