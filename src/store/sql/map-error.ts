import { GatewayError } from '../../errors/gateway-error.js';
import { publishStoreFailure } from '../../pipeline/events.js';

const CONFLICT = new Set(['SQLITE_CONSTRAINT_UNIQUE', 'SQLITE_CONSTRAINT_PRIMARYKEY', '23505']);
const MISSING_REFERENCE = new Set(['SQLITE_CONSTRAINT_FOREIGNKEY', '23503']);

/**
 * Maps a native SQLite or PostgreSQL error to the store's codes. Anything unrecognised becomes
 * STORE_UNAVAILABLE: callers deciding access then deny (issue 5 §3) rather than mistake it for "absent".
 */
export function mapStoreError(error: unknown, action: string): GatewayError {
  if (GatewayError.is(error)) return error;
  const code = typeof error === 'object' && error !== null ? String((error as { code?: unknown }).code) : '';
  if (CONFLICT.has(code)) return new GatewayError('MCPGATE_ERR_STORE_CONFLICT', `${action}: a record with that name or key already exists`, { cause: error });
  if (MISSING_REFERENCE.has(code)) {
    return new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', `${action}: a referenced record does not exist`, { cause: error });
  }
  // A conflict or a missing reference is the caller's request, answered as such; this is the store failing.
  publishStoreFailure('MCPGATE_ERR_STORE_UNAVAILABLE');
  // Never echo the driver's message to clients (it can hold connection details); it stays in `cause`.
  return new GatewayError('MCPGATE_ERR_STORE_UNAVAILABLE', `${action}: the store is unavailable`, { cause: error });
}

/** A batch statement changed an unexpected number of rows: a record moved under the caller, so nothing was written. */
export function batchConflict(action: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_STORE_CONFLICT', `${action}: a record changed or disappeared meanwhile; nothing was written, try again`);
}
