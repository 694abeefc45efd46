import type { LimitDimension, RateLimitRuleConfig } from '../config/ratelimit-schema.js';
import { compileGlobs, matchesAny } from '../util/glob.js';
import type { LimitSubject, LimitVerdict } from './rate-limiter.js';

/** A rule as checks use it: globs compiled and GCRA's interval and span worked out once, at start-up. */
export interface CompiledRule {
  readonly name: string;
  readonly limit: number;
  readonly windowMs: number;
  /** windowMs / limit in µs, rounded up so that the configured rate is never exceeded. */
  readonly intervalUs: number;
  /** burst × interval in µs: how far ahead of now a counter's TAT may run. */
  readonly spanUs: number;
  readonly servers: readonly RegExp[] | undefined;
  readonly tools: readonly RegExp[] | undefined;
  readonly by: readonly LimitDimension[];
}

/** A subject part that is not there (a caller with no team, keyless dev mode) is a bucket of its own. */
const MISSING = '-';

export const ALLOWED: LimitVerdict = Object.freeze({ allowed: true });

export function compileRules(rules: readonly RateLimitRuleConfig[]): CompiledRule[] {
  return rules.map((rule) => {
    const intervalUs = Math.ceil((rule.windowMs * 1000) / rule.limit);
    return {
      name: rule.name,
      limit: rule.limit,
      windowMs: rule.windowMs,
      intervalUs,
      spanUs: rule.burst * intervalUs,
      servers: compileGlobs(rule.match?.servers),
      tools: compileGlobs(rule.match?.tools),
      by: rule.by,
    };
  });
}

export function ruleApplies(rule: CompiledRule, subject: LimitSubject): boolean {
  return (rule.servers === undefined || matchesAny(rule.servers, subject.server)) && (rule.tools === undefined || matchesAny(rule.tools, subject.tool));
}

function partOf(subject: LimitSubject, dimension: LimitDimension): string | undefined {
  switch (dimension) {
    case 'key':
      return subject.keyId;
    case 'team':
      return subject.teamId;
    case 'org':
      return subject.orgId;
    case 'server':
      return subject.server;
    case 'tool':
      return subject.tool;
  }
}

/**
 * `rule:part:part…`, one per counter. Each present part is a JSON string and a missing one a bare `-`, so the
 * key is injective: a key id holding `:`, quotes or a literal `-` cannot spell another subject's counter, and
 * lone surrogates come out as `\uXXXX` text rather than collapsing to U+FFFD on their way to Redis as UTF-8.
 */
export function counterKey(rule: CompiledRule, subject: LimitSubject): string {
  let key = rule.name;
  for (const dimension of rule.by) {
    const part = partOf(subject, dimension);
    key += part === undefined ? `:${MISSING}` : `:${JSON.stringify(part)}`;
  }
  return key;
}

export function limitedVerdict(rule: CompiledRule, waitUs: number): LimitVerdict {
  return { allowed: false, reason: 'limited', rule: rule.name, retryAfterMs: Math.max(1, Math.ceil(waitUs / 1000)), limit: rule.limit, windowMs: rule.windowMs };
}
