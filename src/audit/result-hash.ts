import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { GatewayError } from '../errors/gateway-error.js';
import { errorMessage } from '../errors/error-message.js';
import type { ResultHashAlgorithm } from '../config/governance-schema.js';
import { sha256Hex } from './record.js';

/**
 * The `resultHash` of a call record (decision 0031): the digest of the result's bytes as the client receives them.
 *
 * - `blake3` (the default) writes `blake3:` and 64 hex digits, what `b3sum` prints for those bytes. BLAKE3 hashes a
 *   large result in well under half the CPU time SHA-256 takes with the CPU's SHA extensions (0.22–0.25 against
 *   0.58–0.60 ms per MiB here), because it hashes several 1 KiB chunks at once in SIMD lanes; at 1 MiB per call the hash was the
 *   gateway's largest cost over a plain forwarder.
 * - `sha256` writes 64 hex digits alone, what `sha256sum` prints: the form of every record written before the choice
 *   existed, and the one for a deployment that may use only FIPS-approved digests.
 *
 * The prefix names the algorithm, so a chain holding both forms verifies and a holder of a result knows which tool
 * to match it with. The chain's own links stay SHA-256 (`record.ts`): they hash a few hundred bytes each.
 */

/** What a record's `resultHash` may be: 64 hex digits (SHA-256), or `blake3:` and 64 hex digits. */
export const RESULT_HASH_PATTERN = /^(?:blake3:)?[0-9a-f]{64}$/;

const BLAKE3_PREFIX = 'blake3:';

/** Hashes one result: its text, or its bytes after an optional head the gateway put in front of them. */
export interface ResultHasher {
  text(text: string): string;
  bytes(head: Buffer | undefined, bytes: Buffer): string;
}

type Blake3Binding = Pick<typeof import('@napi-rs/blake-hash'), 'blake3UrlSafeBase64' | 'Blake3Hasher'>;

const sha256: ResultHasher = {
  text: sha256Hex,
  bytes(head, bytes) {
    return head === undefined ? sha256Hex(bytes) : createHash('sha256').update(head).update(bytes).digest('hex');
  },
};

function blake3Hasher(binding: Blake3Binding): ResultHasher {
  // The binding's string answer costs less than its Buffer one (an external buffer with a finalizer per call), and
  // turning 43 base64url characters into hex is cheaper than either.
  const hex = (base64url: string): string => BLAKE3_PREFIX + Buffer.from(base64url, 'base64url').toString('hex');
  return {
    text: (text) => hex(binding.blake3UrlSafeBase64(text)),
    bytes(head, bytes) {
      if (head === undefined) return hex(binding.blake3UrlSafeBase64(bytes));
      return BLAKE3_PREFIX + new binding.Blake3Hasher().update(head).update(bytes).digest('hex');
    },
  };
}

let loaded: Blake3Binding | undefined;

/**
 * The hasher for `algorithm`. BLAKE3 comes from a native binding (`@napi-rs/blake-hash`, one prebuilt binary per
 * platform); where it does not load, a gateway configured for it does not start: it never falls back to another
 * digest on its own.
 */
export function resultHasher(algorithm: ResultHashAlgorithm): ResultHasher {
  if (algorithm === 'sha256') return sha256;
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)('@napi-rs/blake-hash') as Blake3Binding;
    } catch (error) {
      throw new GatewayError(
        'MCPGATE_ERR_CONFIG_INVALID',
        `audit.resultHash is blake3, but its native binding (@napi-rs/blake-hash) does not load on ${process.platform}-${process.arch}: ${errorMessage(error)}; reinstall with npm ci, or set audit.resultHash: sha256`,
      );
    }
  }
  return blake3Hasher(loaded);
}
