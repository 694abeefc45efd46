import type { DecisionMemo } from './decision-memo.js';
import type { Caller } from '../model/caller.js';
import { AllowAllDecision, DenyAllDecision, type AccessDecision } from './decision.js';

/**
 * What the router asks once per request (issue 5 §7): the caller's effective permission. `undefined` is "no
 * authenticated caller", which only `auth.mode: none` turns into an allow; everywhere else it denies, so a
 * transport that forgot to authenticate fails closed (DESIGN.md invariant 3).
 */
export interface AccessPolicy {
  decide(caller: Caller | undefined): Promise<AccessDecision>;
}

const ALLOW_ALL = new AllowAllDecision();
const NO_CALLER = new DenyAllDecision({ reason: 'none', message: 'no authenticated caller' });

/** `auth.mode: none`: every request may use everything (dev mode on loopback only, enforced by the schema). */
export const OPEN_ACCESS: AccessPolicy = { decide: () => Promise.resolve(ALLOW_ALL) };

/** Enforced access: decisions come from the memo, which computes each once per TTL per full caller identity. */
export function enforcedAccess(memo: DecisionMemo): AccessPolicy {
  return {
    decide: (caller) => (caller === undefined ? Promise.resolve(NO_CALLER) : memo.decide(caller, '*')),
  };
}
