import { z } from 'zod';
import { isTraceId } from '../util/trace-id.js';
import { AUDIT_DECISIONS, AUDIT_KINDS } from './record.js';

/**
 * What a record filter's value may be (`AuditRecordFilter`), for every way of asking for records: the admin API's
 * `GET /audit` and `mcpgate audit export` check their values with these shapes, so the two never accept different
 * filters. Ids and names are 1–200 characters with no NUL (the store binds text, and PostgreSQL's has no NUL); a
 * trace id is what a record carries (`util/trace-id.ts`); a decision and a kind are the values records have.
 */
const text = z
  .string()
  .min(1, 'must not be empty')
  .max(200, 'must be at most 200 characters')
  .refine((value) => !value.includes('\0'), 'must not contain NUL characters');

export const FILTER_VALUES = {
  id: text,
  name: text,
  traceId: z.string().refine(isTraceId, 'must be 32 lowercase hex characters, not all zeros'),
  decision: z.enum(AUDIT_DECISIONS, { error: `must be one of ${AUDIT_DECISIONS.join(', ')}` }),
  kind: z.enum(AUDIT_KINDS, { error: `must be one of ${AUDIT_KINDS.join(', ')}` }),
} as const;
