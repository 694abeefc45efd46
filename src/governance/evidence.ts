import type { ServerConfig } from '../config/schema.js';
import { PLACEHOLDER_PIN } from '../util/tls-pins.js';

/** What the gateway can say about the identity of the upstream a call reached (issue 7 §1, audit `evidence`). */
export type UpstreamEvidence = 'tls-pinned' | 'spawn-measured' | 'spawn-unmeasured' | 'unpinned';

/**
 * The evidence a server's configuration gives: a pinned certificate or SPKI (checked on every connection,
 * DESIGN.md invariant 2), a measured executable (checked before every spawn, invariant 8), or neither. The
 * placeholder pin pins nothing.
 */
export function evidenceOf(server: ServerConfig): UpstreamEvidence {
  if (server.transport === 'stdio') return server.digest === undefined ? 'spawn-unmeasured' : 'spawn-measured';
  const pins = [...(server.tls?.pin ?? []), ...(server.tls?.spkiPin ?? [])].filter((pin) => pin !== PLACEHOLDER_PIN);
  return pins.length > 0 ? 'tls-pinned' : 'unpinned';
}
