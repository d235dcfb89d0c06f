import { createHash } from 'node:crypto';
import { compareCodePoints, DEFAULT_SEPARATORS, pythonJsonDumps } from './canonical-json.js';

/** The parts of a uAgents protocol manifest that its digest covers. */
export interface ProtocolManifestContent {
  version: string;
  models: readonly { digest: string; [field: string]: unknown }[];
  interactions: readonly { request: string; [field: string]: unknown }[];
}

/**
 * `ProtocolSpecification.compute_digest` of uagents-core: `proto:` and the hex SHA-256 of
 * Python's `json.dumps(…, sort_keys=True)` (default separators) of the version, an empty
 * metadata object, the models sorted by digest and the interactions sorted by request.
 *
 * A manifest whose schemas hold a float with an integral value (`"default": 1.0`) hashes
 * differently here: JSON.parse keeps no trace of the `.0` that Python printed (see
 * {@link pythonJsonDumps}), so such a manifest cannot be verified from its parsed form.
 */
export function protocolManifestDigest(manifest: ProtocolManifestContent): string {
  const cleaned = {
    version: manifest.version,
    metadata: {},
    models: [...manifest.models].sort((a, b) => compareCodePoints(a.digest, b.digest)),
    interactions: [...manifest.interactions].sort((a, b) =>
      compareCodePoints(a.request, b.request),
    ),
  };
  const text = pythonJsonDumps(cleaned, DEFAULT_SEPARATORS);
  return `proto:${createHash('sha256').update(text, 'utf8').digest('hex')}`;
}
