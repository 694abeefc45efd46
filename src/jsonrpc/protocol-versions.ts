/** Legacy-era protocol revisions the downstream endpoint speaks (DESIGN.md §3). Newest first. */
export const SUPPORTED_PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'] as const;

export type ProtocolVersion = (typeof SUPPORTED_PROTOCOL_VERSIONS)[number];

export const LATEST_PROTOCOL_VERSION: ProtocolVersion = '2025-11-25';

/** Spec 2025-06-18 §transports: a missing MCP-Protocol-Version header means 2025-03-26. */
export const DEFAULT_HEADER_PROTOCOL_VERSION: ProtocolVersion = '2025-03-26';

export function isSupportedVersion(version: unknown): version is ProtocolVersion {
  return typeof version === 'string' && (SUPPORTED_PROTOCOL_VERSIONS as readonly string[]).includes(version);
}

/** Spec lifecycle: answer with the client's version when supported, else with our latest. */
export function negotiateVersion(requested: unknown): ProtocolVersion {
  return isSupportedVersion(requested) ? requested : LATEST_PROTOCOL_VERSION;
}

/** JSON-RPC batches exist only in 2025-03-26 (removed in 2025-06-18). */
export function allowsBatches(version: ProtocolVersion): boolean {
  return version === '2025-03-26';
}
