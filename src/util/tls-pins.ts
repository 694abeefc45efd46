import { createHash, X509Certificate } from 'node:crypto';

/**
 * The two TLS pin forms of issue 4 §3 and DESIGN.md invariant 2, as pure functions over bytes. Kept here (not in
 * `upstream/`) because the config schema validates the format and the upstream connector checks the peer, and
 * `config/` may not import `upstream/`.
 *
 * - Certificate pin: `SHA256:` + base64 of the SHA-256 of the leaf certificate's DER encoding.
 * - SPKI pin: `sha256/` + base64 of the SHA-256 of its SubjectPublicKeyInfo DER encoding (the HPKP form; it
 *   survives a certificate renewal that keeps the key).
 */

export const CERT_PIN_PREFIX = 'SHA256:';
export const SPKI_PIN_PREFIX = 'sha256/';

/** "No pin recorded yet" (issue 4 §3): accepted in dev mode only, where CA checks alone apply. */
export const PLACEHOLDER_PIN = `${CERT_PIN_PREFIX}${'A'.repeat(43)}=`;

export type PinKind = 'cert' | 'spki';

/** Strict base64 of exactly 32 bytes: 43 characters and one `=`. */
const DIGEST_BASE64 = /^[A-Za-z0-9+/]{43}=$/;

/**
 * Why `pin` is not a well-formed pin of `kind`, or undefined when it is. The digest must be the canonical base64
 * of exactly 32 bytes (a non-canonical encoding could never equal a computed pin, so it would fail every
 * connection; it is refused up front instead).
 */
export function pinFormatProblem(pin: string, kind: PinKind): string | undefined {
  const prefix = kind === 'cert' ? CERT_PIN_PREFIX : SPKI_PIN_PREFIX;
  if (!pin.startsWith(prefix)) {
    const other = kind === 'cert' ? `"${SPKI_PIN_PREFIX}" pins go in tls.spkiPin` : `"${CERT_PIN_PREFIX}" pins go in tls.pin`;
    return `a ${kind === 'cert' ? 'certificate' : 'SPKI'} pin starts with "${prefix}" (${other})`;
  }
  const digest = pin.slice(prefix.length);
  if (!DIGEST_BASE64.test(digest) || Buffer.from(digest, 'base64').toString('base64') !== digest) {
    return `the part after "${prefix}" must be the base64 of a 32-byte SHA-256 digest (44 characters ending in "=")`;
  }
  return undefined;
}

export function isPlaceholderPin(pin: string): boolean {
  return pin === PLACEHOLDER_PIN;
}

/** Both pins of one certificate. */
export interface CertificatePins {
  /** `SHA256:<base64>` over the certificate DER. */
  readonly cert: string;
  /** `sha256/<base64>` over the SubjectPublicKeyInfo DER. */
  readonly spki: string;
}

/** Computes both pin forms from a certificate's DER bytes (e.g. `TLSSocket.getPeerCertificate(true).raw`). */
export function pinsOfCertificate(der: Buffer): CertificatePins {
  const spkiDer = new X509Certificate(der).publicKey.export({ type: 'spki', format: 'der' });
  return {
    cert: `${CERT_PIN_PREFIX}${createHash('sha256').update(der).digest('base64')}`,
    spki: `${SPKI_PIN_PREFIX}${createHash('sha256').update(spkiDer).digest('base64')}`,
  };
}

/** Accepts the config's `string | string[]` shape. */
export function toPinList(value: string | readonly string[] | undefined): string[] {
  if (value === undefined) return [];
  return typeof value === 'string' ? [value] : [...value];
}

/**
 * Whether `host` (a URL's `hostname`) is a loopback address: 127.0.0.0/8, ::1 or `localhost` (issue 4 §3,
 * plain `http://` is allowed only there). Anything else, including IPv4-mapped forms, is not.
 */
export function isLoopbackHost(host: string): boolean {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  if (bare.toLowerCase() === 'localhost' || bare === '::1') return true;
  const octets = bare.split('.');
  return octets.length === 4 && octets[0] === '127' && octets.every((octet) => /^[0-9]{1,3}$/.test(octet) && Number(octet) <= 255);
}
