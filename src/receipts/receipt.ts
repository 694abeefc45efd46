import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { z } from 'zod';
import type { StatementSigner, StatementVerifier } from '../audit/checkpoint.js';
import { canonicalJson } from '../util/canonical-json.js';
import { GatewayError } from '../errors/gateway-error.js';

/**
 * Session receipts (issue 7 §5): when a session ends the gateway signs, with Ed25519, a statement of who the
 * session belonged to, what it did (calls, denials) and where its audit records sit in the hash chain. The
 * file form is the canonical JSON of `{ receipt, signature }`; the signature covers the canonical JSON of
 * `receipt`, so anyone can verify it with this file's rules and the public key.
 */

export const RECEIPT_VERSION = 1;
export const END_REASONS = ['deleted', 'expired', 'shutdown'] as const;
export type EndReason = (typeof END_REASONS)[number];

/** Receipts are a few hundred bytes; the cap keeps a mistaken path (a log, an export) from being parsed whole. */
export const MAX_RECEIPT_BYTES = 64 * 1024;

const id = z.string().min(1).max(200);
const hex64 = z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 lowercase hex characters');
// Date.prototype.toISOString output: the one spelling, so the canonical bytes are unambiguous.
const isoTime = z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/, 'must be an ISO 8601 UTC time with milliseconds');
const count = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

export const receiptPrincipalSchema = z.strictObject({
  keyId: id,
  userId: id.optional(),
  teamId: id.optional(),
  orgId: id.optional(),
  agentId: id.optional(),
});

export const receiptBodySchema = z
  .strictObject({
    version: z.literal(RECEIPT_VERSION),
    sessionId: id,
    principal: receiptPrincipalSchema,
    startedAt: isoTime,
    endedAt: isoTime,
    endReason: z.enum(END_REASONS),
    calls: count,
    denials: count,
    firstAuditHash: hex64.optional(),
    lastAuditHash: hex64.optional(),
    auditChainId: id.optional(),
    catalogSnapshotHash: id.optional(),
    policyHash: id.optional(),
    /** Base64 (standard, padded) of the 32-byte raw Ed25519 public key. */
    publicKey: z.string().regex(/^[A-Za-z0-9+/]{43}=$/, 'must be the base64 of a 32-byte Ed25519 public key'),
    /** First 16 hex characters of the SHA-256 of the raw public key. */
    keyId: z.string().regex(/^[0-9a-f]{16}$/, 'must be 16 lowercase hex characters'),
  })
  .refine((body) => body.denials <= body.calls, { message: 'denials cannot exceed calls', path: ['denials'] })
  .refine((body) => (body.firstAuditHash === undefined) === (body.lastAuditHash === undefined) && (body.firstAuditHash === undefined) === (body.auditChainId === undefined), {
    message: 'firstAuditHash, lastAuditHash and auditChainId are given together or not at all',
    path: ['firstAuditHash'],
  })
  .refine((body) => body.startedAt <= body.endedAt, { message: 'endedAt is before startedAt', path: ['endedAt'] });

export type ReceiptBody = z.infer<typeof receiptBodySchema>;
export type ReceiptPrincipal = z.infer<typeof receiptPrincipalSchema>;

/** What the gateway knows at session end; the signer adds version and its key. */
export type ReceiptInput = Omit<ReceiptBody, 'version' | 'publicKey' | 'keyId'>;

/** The receipt file: `canonicalJson` of this is what is stored, served and verified. */
export interface SignedReceipt {
  readonly receipt: ReceiptBody;
  /** Base64url (no padding) of the 64-byte Ed25519 signature over `canonicalJson(receipt)`. */
  readonly signature: string;
}

/** The one byte form of a signed receipt: what the admin API serves and `receipt verify` expects. */
export function serializeReceipt(signed: SignedReceipt): string {
  return canonicalJson(signed);
}

/** The 32 raw bytes of an Ed25519 public key. */
export function rawPublicKey(key: KeyObject): Buffer {
  const jwk = key.export({ format: 'jwk' });
  if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519' || typeof jwk.x !== 'string') throw new TypeError('not an Ed25519 key');
  return Buffer.from(jwk.x, 'base64url');
}

/** A public key's id: the first 16 hex characters of the SHA-256 of its raw bytes. */
export function receiptKeyId(raw: Buffer): string {
  return createHash('sha256').update(raw).digest('hex').slice(0, 16);
}

function publicKeyFromRaw(raw: Buffer): KeyObject {
  return createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: raw.toString('base64url') }, format: 'jwk' });
}

/**
 * Signs receipts with one Ed25519 private key, and the gateway's other statements (audit checkpoints) with the
 * same key, so one public key checks everything the gateway signs. Each statement's canonical JSON has fields no
 * other kind has, so a signature over one can never pass for another.
 */
export class ReceiptSigner implements StatementSigner, StatementVerifier {
  readonly #privateKey: KeyObject;
  readonly #publicKey: KeyObject;
  /** SPKI PEM of the public key: what verifiers pin with `--public-key`. */
  readonly publicKeyPem: string;
  /** Base64 of the raw public key, as carried in every receipt. */
  readonly publicKey: string;
  readonly keyId: string;

  constructor(privateKey: KeyObject) {
    if (privateKey.type !== 'private' || privateKey.asymmetricKeyType !== 'ed25519') {
      throw new GatewayError('MCPGATE_ERR_RECEIPT_KEY', 'the receipt signing key must be an Ed25519 private key');
    }
    this.#privateKey = privateKey;
    const publicKey = createPublicKey(privateKey);
    this.#publicKey = publicKey;
    const raw = rawPublicKey(publicKey);
    this.publicKeyPem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    this.publicKey = raw.toString('base64');
    this.keyId = receiptKeyId(raw);
  }

  /** From a PKCS#8 PEM text. @throws GatewayError MCPGATE_ERR_RECEIPT_KEY naming `what`, never the key. */
  static fromPem(pem: string, what = 'the receipt signing key'): ReceiptSigner {
    let key: KeyObject;
    try {
      key = createPrivateKey({ key: pem, format: 'pem' });
    } catch (error) {
      throw new GatewayError('MCPGATE_ERR_RECEIPT_KEY', `${what} is not a PEM private key`, { cause: error });
    }
    if (key.asymmetricKeyType !== 'ed25519') {
      throw new GatewayError('MCPGATE_ERR_RECEIPT_KEY', `${what} is a ${key.asymmetricKeyType ?? 'unknown'} key; receipts are signed with Ed25519 (openssl genpkey -algorithm ed25519)`);
    }
    return new ReceiptSigner(key);
  }

  signStatement(text: string): string {
    return sign(null, Buffer.from(text, 'utf8'), this.#privateKey).toString('base64url');
  }

  verifyStatement(text: string, signature: string): boolean {
    return verifySignature(this.#publicKey, text, signature);
  }

  /** @throws GatewayError MCPGATE_ERR_INTERNAL when the input would not make a valid receipt (a bug in the caller). */
  sign(input: ReceiptInput): SignedReceipt {
    const candidate = { ...stripUndefined(input), version: RECEIPT_VERSION, publicKey: this.publicKey, keyId: this.keyId };
    const parsed = receiptBodySchema.safeParse(candidate);
    if (!parsed.success) {
      throw new GatewayError('MCPGATE_ERR_INTERNAL', `cannot sign an invalid receipt: ${describeIssue(parsed.error)}`);
    }
    const receipt = parsed.data;
    const signature = sign(null, Buffer.from(canonicalJson(receipt), 'utf8'), this.#privateKey).toString('base64url');
    return { receipt, signature };
  }
}

function stripUndefined<T extends object>(value: T): T {
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    if (child === undefined) continue;
    out[key] = typeof child === 'object' && child !== null && !Array.isArray(child) ? stripUndefined(child) : child;
  }
  return out as T;
}

function describeIssue(error: z.ZodError): string {
  const issue = error.issues[0];
  if (issue === undefined) return 'invalid';
  const path = issue.path.length === 0 ? 'receipt' : `receipt.${issue.path.join('.')}`;
  return `${path} ${issue.message}`;
}

export type ReceiptVerification =
  | {
      readonly ok: true;
      readonly signed: SignedReceipt;
      readonly keyId: string;
      /** True when checked against a key the verifier supplied; false: only against the key inside the receipt. */
      readonly keyPinned: boolean;
    }
  | { readonly ok: false; readonly reason: string };

export interface VerifyOptions {
  /** The expected signer: SPKI PEM text (or a private key's PEM, whose public half is used) or a KeyObject. */
  readonly publicKey?: string | KeyObject;
}

const SIGNATURE = /^[A-Za-z0-9_-]{86}$/;

function fail(reason: string): ReceiptVerification {
  return { ok: false, reason };
}

/**
 * Checks a receipt file. The text must be exactly the canonical JSON the gateway produced (one trailing
 * newline allowed): whitespace and key order carry no meaning, so accepting variants would let bytes change
 * without the signature noticing, and "any flipped byte fails" would no longer hold. Never throws.
 */
export function verifyReceipt(signedJson: string, options: VerifyOptions = {}): ReceiptVerification {
  if (typeof signedJson !== 'string') return fail('the receipt is not text');
  if (Buffer.byteLength(signedJson) > MAX_RECEIPT_BYTES) return fail(`the receipt is larger than ${MAX_RECEIPT_BYTES} bytes`);
  const text = signedJson.endsWith('\r\n') ? signedJson.slice(0, -2) : signedJson.endsWith('\n') ? signedJson.slice(0, -1) : signedJson;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return fail('the receipt is not valid JSON (it was altered or truncated)');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return fail('the receipt is not a JSON object');
  const keys = Object.keys(parsed).sort();
  if (keys.length !== 2 || keys[0] !== 'receipt' || keys[1] !== 'signature') {
    return fail('the receipt file must hold exactly "receipt" and "signature"');
  }
  const { receipt, signature } = parsed as { receipt: unknown; signature: unknown };
  const signatureBytes = typeof signature === 'string' ? signatureOf(signature) : undefined;
  if (typeof signature !== 'string' || signatureBytes === undefined) return fail('the signature is not the base64url of 64 bytes');
  const body = receiptBodySchema.safeParse(receipt);
  if (!body.success) return fail(`the receipt body is malformed: ${describeIssue(body.error)}`);
  let canonical: string;
  try {
    canonical = canonicalJson(parsed);
  } catch {
    return fail('the receipt cannot be put in canonical form');
  }
  if (canonical !== text) {
    return fail('the receipt file is not byte-for-byte the canonical JSON the gateway wrote (it was edited or reformatted); fetch it again from GET /admin/v1/sessions/<id>/receipt');
  }
  const raw = Buffer.from(body.data.publicKey, 'base64');
  if (raw.length !== 32) return fail('the receipt publicKey is not 32 bytes');
  if (receiptKeyId(raw) !== body.data.keyId) return fail('the receipt keyId does not match its publicKey');
  let embedded: KeyObject;
  try {
    embedded = publicKeyFromRaw(raw);
  } catch {
    return fail('the receipt publicKey is not an Ed25519 key');
  }
  let keyPinned = false;
  if (options.publicKey !== undefined) {
    const expected = expectedRawKey(options.publicKey);
    if (typeof expected === 'string') return fail(expected);
    if (!expected.equals(raw)) {
      return fail(`the receipt is signed by key ${body.data.keyId}, not by the expected key ${receiptKeyId(expected)}`);
    }
    keyPinned = true;
  }
  const valid = verify(null, Buffer.from(canonicalJson(body.data), 'utf8'), embedded, signatureBytes);
  if (!valid) return fail('the signature does not match the receipt: the receipt or its signature was altered');
  return { ok: true, signed: { receipt: body.data, signature }, keyId: body.data.keyId, keyPinned };
}

/** The 64 bytes of a base64url Ed25519 signature in its one spelling, or undefined. */
function signatureOf(signature: string): Buffer | undefined {
  if (!SIGNATURE.test(signature)) return undefined;
  const bytes = Buffer.from(signature, 'base64url');
  // Base64url's last character has spare bits: without this check two spellings would verify alike.
  return bytes.length === 64 && bytes.toString('base64url') === signature ? bytes : undefined;
}

/** Whether `signature` (base64url, exactly 64 bytes in its one spelling) is `key`'s over the UTF-8 text. */
function verifySignature(key: KeyObject, text: string, signature: string): boolean {
  const bytes = signatureOf(signature);
  return bytes !== undefined && verify(null, Buffer.from(text, 'utf8'), key, bytes);
}

/**
 * A verifier of the gateway's signed statements (audit checkpoints) under a known public key: SPKI PEM text, or
 * a private key's PEM (its public half is used). @throws GatewayError MCPGATE_ERR_RECEIPT_KEY when it is not an
 * Ed25519 key.
 */
export function statementVerifier(key: string | KeyObject): StatementVerifier {
  const raw = expectedRawKey(key);
  if (typeof raw === 'string') throw new GatewayError('MCPGATE_ERR_RECEIPT_KEY', raw);
  const publicKey = publicKeyFromRaw(raw);
  return { keyId: receiptKeyId(raw), verifyStatement: (text, signature) => verifySignature(publicKey, text, signature) };
}

/** The raw bytes of the verifier's key, or why it cannot be used. */
function expectedRawKey(key: string | KeyObject): Buffer | string {
  try {
    const object = typeof key === 'string' ? createPublicKey({ key, format: 'pem' }) : key.type === 'private' ? createPublicKey(key) : key;
    if (object.asymmetricKeyType !== 'ed25519') return `the expected public key is a ${object.asymmetricKeyType ?? 'unknown'} key, not Ed25519`;
    return rawPublicKey(object);
  } catch {
    return 'the expected public key is not a PEM public key';
  }
}
