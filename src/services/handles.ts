import { randomBytes } from 'node:crypto';
import { ConflictError } from '../errors.js';
import type { Repositories, Store } from '../store/index.js';

const HANDLE_ALPHABET = 'abcdefghijklmnopqrstuvwxyz234567';
/** How many random handles `generate` tries before it gives up (each collides rarely). */
const GENERATE_ATTEMPTS = 8;

/**
 * A name's letters and digits in dash-separated lower-case words, cut short ('' when it has
 * none): the handle a name reads as.
 */
function handleWords(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 32)
    .replace(/-+$/, '');
}

/**
 * A handle made from a name: its words ({@link handleWords}), then a random word, so that two
 * agents of one name do not collide.
 */
export function handleFromName(name: string): string {
  const suffix = Array.from(randomBytes(6), (b) => HANDLE_ALPHABET[b & 31]).join('');
  return `${handleWords(name) || 'agent'}-${suffix}`;
}

/**
 * Whether another agent than `address` holds `handle`: a listing carries it, or an enrolment
 * keeps it (docs/enrolments.md). Registration refuses such a handle; with no address, whether
 * any agent holds it.
 */
export async function handleHeld(
  repos: Repositories,
  handle: string,
  address?: string,
): Promise<boolean> {
  const holder = await repos.search.addressOfHandle(handle);
  if (holder !== undefined && holder !== address) return true;
  return repos.enrolments.handleHeldByAnother(handle, address);
}

/** Whether a handle is free, and a free one like it when it is not. */
export interface HandleAvailability {
  available: boolean;
  handle: string;
  alternative: string | null;
}

/**
 * The handles API (docs/almanac.md, "Handles"): whether a handle is free, and free handles
 * proposed from a name. A handle is free when registration would accept it from any agent:
 * no listing carries it and no enrolment keeps it (docs/enrolments.md).
 */
export class HandlesService {
  constructor(private readonly store: Store) {}

  /** Whether registration would accept `handle` from an agent that holds none. */
  async isFree(handle: string): Promise<boolean> {
    return !(await handleHeld(this.store.repos, handle));
  }

  /** Whether the handle is free; when it is not, a free one made from it. */
  async availability(handle: string): Promise<HandleAvailability> {
    if (await this.isFree(handle)) return { available: true, handle, alternative: null };
    return { available: false, handle, alternative: await this.freeFrom(handle) };
  }

  /** The handle a name reads as, and whether it is free (Almanac v1 asks by name). */
  availabilityOfName(name: string): Promise<HandleAvailability> {
    return this.availability(handleWords(name) || 'agent');
  }

  /** A free handle from a name: the name's words when they are free, else with a random word. */
  async generate(name: string): Promise<string> {
    const words = handleWords(name);
    if (words && (await this.isFree(words))) return words;
    return this.freeFrom(name);
  }

  private async freeFrom(name: string): Promise<string> {
    for (let attempt = 0; attempt < GENERATE_ATTEMPTS; attempt++) {
      const candidate = handleFromName(name);
      if (await this.isFree(candidate)) return candidate;
    }
    throw new ConflictError('No free handle was found for this name; try another name');
  }
}
