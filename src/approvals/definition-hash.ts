import { createHash } from 'node:crypto';
import type { JsonObject } from '../jsonrpc/message.js';
import { canonicalJson } from '../util/canonical-json.js';

/**
 * The fields of a tool that make up its approved definition (DESIGN.md invariant 11, issue 7 §2). Everything
 * a model reads to decide what a tool does and what it may send it, and the `title` clients show the people who
 * approve a call (a tool retitled "Read file" while it still deletes is a rug-pull too); `_meta`, icons and the
 * like are left out so that cosmetic upstream changes do not quarantine a tool. A tool without a title hashes
 * as it did before `title` was added.
 */
export const DEFINITION_FIELDS = ['name', 'title', 'description', 'inputSchema', 'outputSchema', 'annotations'] as const;

export type DefinitionField = (typeof DEFINITION_FIELDS)[number];

/** The approved part of a tool: only {@link DEFINITION_FIELDS}, each present only when the upstream sent it. */
export type ToolDefinition = Partial<Record<DefinitionField, unknown>>;

/**
 * Picks the definition fields of an upstream tool object. Absent fields stay absent (never `null`), so that a
 * server that starts sending `outputSchema: null` counts as a change rather than hashing like before.
 */
export function toolDefinition(tool: JsonObject): ToolDefinition {
  const definition: ToolDefinition = {};
  for (const field of DEFINITION_FIELDS) {
    if (tool[field] !== undefined) definition[field] = tool[field];
  }
  return definition;
}

/**
 * SHA-256 hex of the canonical JSON (keys sorted at every level, no whitespace) of the tool's definition.
 * Must be given the upstream's original tool object: a gateway rename or description override is the
 * operator's own edit, not the upstream's, and must not look like drift.
 */
export function toolDefinitionHash(tool: JsonObject): string {
  return sha256Hex(canonicalJson(toolDefinition(tool)));
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('hex');
}
