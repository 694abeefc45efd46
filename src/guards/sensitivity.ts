import { SENSITIVITY_LABELS, type SensitivityLabel } from '../config/governance-schema.js';

/**
 * A session's sensitivity high-water mark (issue 7 §4): each tool's configured label raises it, nothing lowers
 * it, and policies read it (e.g. deny `external` servers once `confidential` data was read).
 */

export type { SensitivityLabel };

/** The lowest label: what a session starts at. */
export const LOWEST_SENSITIVITY: SensitivityLabel = SENSITIVITY_LABELS[0];

/** Position of a label in SENSITIVITY_LABELS (0 = public). Unknown strings rank highest: fail closed. */
export function rank(label: string): number {
  const index = (SENSITIVITY_LABELS as readonly string[]).indexOf(label);
  return index === -1 ? SENSITIVITY_LABELS.length : index;
}

export function isSensitivityLabel(value: unknown): value is SensitivityLabel {
  return typeof value === 'string' && (SENSITIVITY_LABELS as readonly string[]).includes(value);
}

/**
 * The mark after reading data labelled `label`: the higher of the two, never lower than `current`. An
 * unknown label raises to the highest known label, since a typo must not leave a session looking clean.
 */
export function raise(current: SensitivityLabel, label: string): SensitivityLabel {
  const next: SensitivityLabel = isSensitivityLabel(label) ? label : SENSITIVITY_LABELS[SENSITIVITY_LABELS.length - 1]!;
  return rank(next) > rank(current) ? next : current;
}

/** True when `label` is at least as sensitive as `threshold`. */
export function atLeast(label: string, threshold: SensitivityLabel): boolean {
  return rank(label) >= rank(threshold);
}

/**
 * A mutable high-water mark for one session. Kept tiny: the session holds one, the router raises it after a
 * result passes the guards, and the policy context reads `current`.
 */
export class SensitivityMark {
  #current: SensitivityLabel;

  constructor(initial: SensitivityLabel = LOWEST_SENSITIVITY) {
    this.#current = initial;
  }

  get current(): SensitivityLabel {
    return this.#current;
  }

  /** Returns the mark after raising. */
  raise(label: string): SensitivityLabel {
    this.#current = raise(this.#current, label);
    return this.#current;
  }
}
