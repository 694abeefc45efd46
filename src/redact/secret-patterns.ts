/**
 * The one list of credential shapes. Logs, audit records and tool results all redact through here so
 * that a format added once is masked everywhere.
 *
 * Every pattern is written to run in linear time: it starts at a literal prefix or behind a
 * lookbehind that admits only the first character of a run, and its repeated classes exclude the
 * delimiter that follows them, so a failed attempt never rescans what a previous attempt covered.
 * Tool results are attacker-controlled and can be megabytes long.
 */

import { AnchorFilter, type Anchor } from './anchor-filter.js';

export interface SecretFinding {
  kind: string;
  start: number;
  end: number;
}

interface ShapePattern {
  kind: string;
  regex: RegExp;
  /**
   * Capture groups that may hold the secret (the first that matched wins); the rest of the match is
   * context kept visible. Without groups the whole match is the secret. Regexes with groups need the
   * `d` flag for match indices.
   */
  groups?: number[];
  accept?: (secret: string, text: string, start: number) => boolean;
  /**
   * Literals one of which occurs in every text the shape finds (its prefix, or what `accept` requires), kept where
   * JSON escaping leaves them intact. The heuristic shapes have none: what they find is named, not formatted.
   */
  anchors?: readonly Anchor[];
}

const cased = (...texts: string[]): Anchor[] => texts.map((text) => ({ text, ignoreCase: false }));
const anyCase = (...texts: string[]): Anchor[] => texts.map((text) => ({ text, ignoreCase: true }));

// Characters that may continue a base64url token; used so a match cannot start mid-token.
const B64URL = 'A-Za-z0-9_-';

/**
 * Object keys whose whole value is a credential, whatever it looks like. Matched after lower-casing
 * and dropping `-` and `_`, so `apiKey`, `api_key` and `API-KEY` are one entry.
 */
const CREDENTIAL_KEY_NAMES = [
  'authorization',
  'proxy-authorization',
  'password',
  'passwd',
  'passphrase',
  'secret',
  'client_secret',
  'secret_key',
  'secret_access_key',
  'aws_secret_access_key',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'session_token',
  'auth_token',
  'api_key',
  'x-api-key',
  'cookie',
  'set-cookie',
  'x-mcpgate-key',
  'private_key',
];

function normaliseKey(key: string): string {
  return key.toLowerCase().replace(/[-_]/g, '');
}

const CREDENTIAL_KEYS = new Set(CREDENTIAL_KEY_NAMES.map(normaliseKey));

/** True when a field of this name holds a credential regardless of its value's shape. */
export function isCredentialKey(key: string): boolean {
  return CREDENTIAL_KEYS.has(normaliseKey(key));
}

/**
 * Spellings of the credential keys for matchers that compare keys literally (pino's redact paths):
 * the listed form plus its camelCase and capitalised variants.
 */
export function credentialKeySpellings(): string[] {
  const out = new Set<string>();
  for (const name of CREDENTIAL_KEY_NAMES) {
    out.add(name);
    const camel = name.replace(/[-_]([a-z])/g, (_m, c: string) => c.toUpperCase());
    out.add(camel);
    out.add(name.charAt(0).toUpperCase() + name.slice(1));
  }
  return [...out];
}

function mixedCase(secret: string): boolean {
  return /[A-Z]/.test(secret) && /[a-z]/.test(secret) && /[0-9/+]/.test(secret);
}

const SHAPES: ShapePattern[] = [
  {
    // RFC 6750 b64token. The lookahead skips WWW-Authenticate parameters (`Bearer realm="..."`). `\t` as two
    // characters is a tab inside JSON text (a tool that answers with its request's headers, stringified).
    kind: 'bearer',
    anchors: anyCase('bearer'),
    regex: /\bbearer(?:[ \t]|\\t)+(?![A-Za-z_-]+=")([A-Za-z0-9._~+/-]{8,4096}=*)/dgi,
    groups: [1],
  },
  {
    kind: 'basic-auth',
    anchors: anyCase('basic'),
    regex: /\bbasic[ \t]+([A-Za-z0-9+/]{8,4096}={0,2})(?![A-Za-z0-9+/=])/dgi,
    groups: [1],
    // Only real credentials: base64 of `user:password`. Keeps "Basic authentication" and friends.
    accept: (secret) => Buffer.from(secret, 'base64').toString('latin1').includes(':'),
  },
  {
    kind: 'jwt',
    anchors: cased('eyJ'),
    regex: new RegExp(`(?<![${B64URL}])eyJ[${B64URL}]{4,16384}\\.[${B64URL}]{2,65536}\\.[${B64URL}]{0,4096}`, 'g'),
  },
  {
    // Gateway keys are `mcpg_` + 43; shorter tails are matched too so a truncated key still masks. No
    // lookbehind: whatever precedes the prefix (`xmcpg_`, `,mcpg_`, the `t` of an escaped `\tmcpg_` in JSON
    // text) it is still our key (issue 22 A1). Linear without one: a failed attempt reads at most 12 characters.
    kind: 'mcpgate-key',
    anchors: cased('mcpg_'),
    regex: new RegExp(`mcpg_[${B64URL}]{8,4096}`, 'g'),
  },
  {
    kind: 'aws-access-key-id',
    anchors: cased('AKIA', 'ASIA'),
    regex: /(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])/g,
  },
  {
    kind: 'aws-secret-key',
    anchors: anyCase('aws'),
    regex: /(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])/g,
    // Forty base64 characters are common (hashes, ids); only those near an AWS mention count, and a
    // lower-case hex digest (git sha) never has the mixed case a real secret key has.
    accept: (secret, text, start) => mixedCase(secret) && /aws/i.test(text.slice(Math.max(0, start - 100), start)),
  },
  {
    kind: 'github-token',
    anchors: cased('ghp_', 'gho_', 'ghu_', 'ghs_', 'ghr_', 'github_pat_'),
    regex: /(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])/g,
  },
  {
    kind: 'gitlab-token',
    anchors: cased('glpat-'),
    regex: new RegExp(`(?<![${B64URL}])glpat-[${B64URL}]{20,4096}`, 'g'),
  },
  {
    kind: 'slack-token',
    anchors: cased('xoxa-', 'xoxb-', 'xoxp-', 'xoxo-', 'xoxs-', 'xoxr-'),
    regex: /(?<![A-Za-z0-9-])xox[abposr]-[A-Za-z0-9-]{10,4096}/g,
  },
  {
    kind: 'stripe-key',
    anchors: cased('sk_live_', 'rk_live_', 'sk_test_', 'rk_test_'),
    regex: /(?<![A-Za-z0-9_])[sr]k_(?:live|test)_[A-Za-z0-9]{16,4096}/g,
  },
  {
    kind: 'google-api-key',
    anchors: cased('AIza'),
    regex: new RegExp(`(?<![${B64URL}])AIza[${B64URL}]{35}(?![${B64URL}])`, 'g'),
  },
  {
    kind: 'anthropic-key',
    anchors: cased('sk-ant-'),
    regex: new RegExp(`(?<![${B64URL}])sk-ant-[${B64URL}]{20,4096}`, 'g'),
  },
  {
    kind: 'openai-key',
    anchors: cased('sk-'),
    regex: new RegExp(`(?<![${B64URL}])sk-(?!ant-)(?:proj-|svcacct-|admin-)?[${B64URL}]{20,4096}`, 'g'),
    // Real keys have no dashes in the random part or carry digits/capitals; `sk-learn-is-a-library` has neither.
    accept: (secret) => {
      const body = secret.replace(/^sk-(?:proj-|svcacct-|admin-)?/, '');
      return !body.includes('-') || /[0-9A-Z]/.test(body);
    },
  },
  {
    // `scheme://user:password@host`: only the password is masked so the URL stays readable.
    kind: 'url-credentials',
    anchors: cased('://'),
    regex: /(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}:\/\/[^\s/:@"']{1,128}:([^\s/@"']{1,256})@/dg,
    groups: [1],
  },
  {
    // `password=...`, `"api_key": "..."`, `db_token: '...'`: the value after a credential-named field.
    // Unquoted values need three characters so `token=1`-style counters are left alone.
    kind: 'credential-assignment',
    regex:
      /(?:passw(?:or)?d|passphrase|secret|token|api[-_]?key|access[-_]?key|private[-_]?key|client[-_]?secret|x-mcpgate-key)["']?[ \t]*(?:=|:(?=[ \t]*["']))[ \t]*(?:"([^"\r\n]{1,4096})"|'([^'\r\n]{1,4096})'|([^\s"'&,;<>\\]{3,4096}))/dgi,
    groups: [1, 2, 3],
  },
];

const PEM_BEGIN = '-----BEGIN ';
const PEM_BODY = /[A-Za-z0-9+/=\s:,-]/;

/** PEM private key blocks, found with indexOf so that many unterminated headers stay linear. */
function findPemBlocks(text: string, out: SecretFinding[]): void {
  const unterminated = new Set<string>();
  let from = 0;
  for (;;) {
    const begin = text.indexOf(PEM_BEGIN, from);
    if (begin === -1) return;
    const labelStart = begin + PEM_BEGIN.length;
    const labelEnd = text.indexOf('-----', labelStart);
    if (labelEnd === -1) return;
    const label = text.slice(labelStart, labelEnd);
    from = labelEnd;
    if (label.length > 40 || !/^[A-Z0-9 ]*PRIVATE KEY$/.test(label)) continue;
    const endMarker = `-----END ${label}-----`;
    const end = unterminated.has(label) ? -1 : text.indexOf(endMarker, labelEnd + 5);
    if (end !== -1) {
      out.push({ kind: 'private-key', start: begin, end: end + endMarker.length });
      from = end + endMarker.length;
      continue;
    }
    // A key cut off before its END line still leaks; mask the header and the body that follows.
    unterminated.add(label);
    let stop = labelEnd + 5;
    while (stop < text.length && PEM_BODY.test(text.charAt(stop))) stop += 1;
    out.push({ kind: 'private-key', start: begin, end: stop });
    from = stop;
  }
}

/**
 * Literal fragments at least one of which occurs in any text a pattern (or a credential key) matches,
 * and which JSON escaping leaves intact. Lets callers skip the full scan of serialised results that
 * cannot hold a secret. Four small alternations rather than one: V8 scans a short list of literals with
 * a skip table, and a long one degrades to trying every alternative at every position (about 2× slower);
 * `gh[pousr]_` with its class is kept away from the other literals, whose scan it slowed 2× on a megabyte.
 */
const TRIGGERS = [
  /pass|secret|token|key|authoriz|cookie|bearer|basic/i,
  /aws|sk-|eyJ|mcpg_|AKIA|ASIA|AIza/i,
  /gh[pousr]_|github_pat_|glpat-|xox/i,
  /k_live_|k_test_|-----BEGIN|:\/\//i,
];

/** Cheap pre-check: false means findSecrets and redactValue would change nothing. */
export function mayContainSecret(text: string): boolean {
  return TRIGGERS.some((trigger) => trigger.test(text));
}

/** The anchors of every format (each shape's but the heuristic ones', and a PEM block's header). */
export const FORMAT_ANCHORS: readonly Anchor[] = [
  ...SHAPES.flatMap((shape) => shape.anchors ?? []),
  ...cased(PEM_BEGIN),
];

const formatFilter = new AnchorFilter(FORMAT_ANCHORS);

/**
 * The pre-check of a formats-only scan (`heuristics: false`) over UTF-8 bytes, read without building a string: false
 * means no format occurs in the text, nor in any part of it, so findSecrets with `heuristics: false` finds nothing in
 * any value the bytes hold. Where a value's text differs from its bytes (JSON escapes), the caller must ensure no
 * anchor can hide behind them (`jsonrpc/json-bytes.ts`).
 */
export function mayContainSecretFormatBytes(bytes: Uint8Array): boolean {
  return formatFilter.test(bytes);
}

/**
 * `heuristics: false` keeps only values whose format identifies them as credentials (a JWT, a provider's key
 * prefix, a PEM block, a Bearer value) and skips guesses from names (`token=…`, a field called `secret`). Tool
 * results use it: their data legitimately names things "token", and a redacted correlation id is a broken
 * result, while a log or an audit record loses nothing by over-redacting.
 */
export interface ScanOptions {
  readonly heuristics?: boolean;
}

const HEURISTIC_KINDS: ReadonlySet<string> = new Set(['credential-assignment']);

export function findSecrets(text: string, options: ScanOptions = {}): SecretFinding[] {
  if (text.length === 0 || !mayContainSecret(text)) return [];
  const heuristics = options.heuristics !== false;
  const found: SecretFinding[] = [];
  findPemBlocks(text, found);
  for (const shape of SHAPES) {
    if (!heuristics && HEURISTIC_KINDS.has(shape.kind)) continue;
    shape.regex.lastIndex = 0;
    for (const match of text.matchAll(shape.regex)) {
      let start = match.index;
      let end = start + match[0].length;
      if (shape.groups) {
        const group = shape.groups.find((index) => match[index] !== undefined);
        const span = group === undefined ? undefined : match.indices?.[group];
        if (!span) continue;
        [start, end] = span;
      }
      if (shape.accept && !shape.accept(text.slice(start, end), text, start)) continue;
      found.push({ kind: shape.kind, start, end });
    }
  }
  return mergeFindings(found);
}

/** Overlapping findings collapse into one span (the earliest finding's kind) so replacement is well-defined. */
function mergeFindings(found: SecretFinding[]): SecretFinding[] {
  if (found.length <= 1) return found;
  found.sort((a, b) => a.start - b.start || b.end - a.end);
  const merged: SecretFinding[] = [];
  for (const finding of found) {
    const last = merged[merged.length - 1];
    if (last && finding.start < last.end) {
      if (finding.end > last.end) last.end = finding.end;
      continue;
    }
    merged.push({ ...finding });
  }
  return merged;
}

function applyFindings(text: string, findings: SecretFinding[]): string {
  if (findings.length === 0) return text;
  let out = '';
  let at = 0;
  for (const finding of findings) {
    out += text.slice(at, finding.start) + `[REDACTED:${finding.kind}]`;
    at = finding.end;
  }
  return out + text.slice(at);
}

export function redactText(text: string): string {
  return applyFindings(text, findSecrets(text));
}

export interface RedactionReport {
  value: unknown;
  /** Kind of each redaction made, one entry per redaction. */
  kinds: string[];
}

const CREDENTIAL_FIELD = '[REDACTED:credential-field]';

/** redactValue plus the kinds it replaced, for callers that count or label redactions. */
export function redactValueWithReport(value: unknown, options: ScanOptions = {}): RedactionReport {
  const kinds: string[] = [];
  const heuristics = options.heuristics !== false;
  const walk = (node: unknown, depth: number): unknown => {
    if (typeof node === 'string') {
      const findings = findSecrets(node, options);
      for (const finding of findings) kinds.push(finding.kind);
      return applyFindings(node, findings);
    }
    if (node === null || typeof node !== 'object') return node;
    // Deeper than any honest JSON; dropping the subtree is safer than returning it unscanned.
    if (depth > 256) return '[REDACTED:too-deep]';
    if (Array.isArray(node)) return node.map((item) => walk(item, depth + 1));
    const out: Record<string, unknown> = {};
    for (const [key, child] of Object.entries(node)) {
      // Booleans and nulls under a credential name (`"secret": false`) carry nothing to hide.
      if (heuristics && isCredentialKey(key) && child !== null && typeof child !== 'boolean' && child !== '') {
        kinds.push('credential-field');
        out[key] = CREDENTIAL_FIELD;
      } else {
        out[key] = walk(child, depth + 1);
      }
    }
    return out;
  };
  return { value: walk(value, 0), kinds };
}

/** Deep copy of a JSON-like value with credential-shaped strings and credential-named fields masked. */
export function redactValue(value: unknown): unknown {
  return redactValueWithReport(value).value;
}
