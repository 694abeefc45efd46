import { z } from 'zod';
import { isLoopbackHost, isPlaceholderPin, pinFormatProblem, type PinKind } from '../util/tls-pins.js';

/**
 * The `tls` block of HTTP servers and the trust rules that depend on more than one field (issue 4 §3, DESIGN.md
 * invariant 2). Every rule fails closed: a pin that cannot be checked, or a connection that cannot be protected,
 * is a configuration error rather than a warning at run time.
 */

/**
 * One pin or several (rotation: any listed pin matches); always a list after parsing, even when a pin is
 * malformed, so the cross-field rules below never see the single-string form.
 */
function pinList(kind: PinKind) {
  return z.union([z.string(), z.array(z.string()).min(1)]).transform((value, ctx) => {
    const pins = typeof value === 'string' ? [value] : value;
    // Checked here rather than per branch of the union, so that the issue says what is wrong with the pin
    // (a union reports only "invalid input") and sits at the pin itself.
    pins.forEach((pin, index) => {
      const problem = pinFormatProblem(pin, kind);
      if (problem === undefined) return;
      ctx.addIssue({
        code: 'custom',
        path: typeof value === 'string' ? [] : [index],
        message: `malformed TLS pin "${pin}": ${problem}`,
        input: pin,
        // Not aborting, so the cross-field rules still run (on the list) and one run reports everything.
        continue: true,
      });
    });
    return pins;
  });
}

export const tlsSchema = z.strictObject({
  /** `SHA256:<base64 of sha256(certificate DER)>`; several for rotation. */
  pin: pinList('cert').optional(),
  /** `sha256/<base64 of sha256(SubjectPublicKeyInfo DER)>`; several for rotation. */
  spkiPin: pinList('spki').optional(),
  /** PEM file of the CA bundle that verifies this server, instead of Node's default roots. */
  ca: z.string().min(1).optional(),
  /** PEM files of the mTLS client certificate and its key; both or neither. */
  cert: z.string().min(1).optional(),
  key: z.string().min(1).optional(),
  /** SNI and the name the certificate is verified against, when it differs from the URL's host. */
  servername: z.string().min(1).optional(),
});

export type TlsConfig = z.infer<typeof tlsSchema>;

/** The fields of an HTTP server entry these rules read. */
interface HttpTrustFields {
  readonly url: string;
  readonly tls?: TlsConfig | undefined;
  readonly allowInsecureHttp: boolean;
}

/**
 * The cross-field rules for one HTTP server, reported on `ctx` with the server named in each message:
 * `tls` needs an `https://` URL; plain `http://` must go to loopback unless `allowInsecureHttp`; the
 * placeholder pin is refused in production mode; an mTLS certificate needs its key and vice versa.
 */
export function checkHttpTrust(name: string, server: HttpTrustFields, mode: 'dev' | 'production', ctx: z.RefinementCtx): void {
  const path = ['servers', name];
  // An unparsable URL is already reported by the url field, whose issue does not stop these rules from running.
  if (!URL.canParse(server.url)) return;
  const url = new URL(server.url);
  if (url.protocol === 'http:') {
    if (server.tls !== undefined) {
      ctx.addIssue({ code: 'custom', path: [...path, 'tls'], message: `server "${name}" sets tls but its URL is plain http://; use https://` });
    }
    if (!isLoopbackHost(url.hostname) && !server.allowInsecureHttp) {
      ctx.addIssue({
        code: 'custom',
        path: [...path, 'url'],
        message: `server "${name}" uses plain http:// to a non-loopback host; use https://, or set allowInsecureHttp: true to accept an unprotected connection`,
      });
    }
  }
  const tls = server.tls;
  if (tls === undefined) return;
  if (mode === 'production') {
    (tls.pin ?? []).forEach((pin, index) => {
      if (!isPlaceholderPin(pin)) return;
      ctx.addIssue({
        code: 'custom',
        path: [...path, 'tls', 'pin', index],
        message: `server "${name}" has the placeholder TLS pin, which is accepted only in gateway.mode: dev; record the real pin (mcpgate pin <url>)`,
      });
    });
  }
  if ((tls.cert === undefined) !== (tls.key === undefined)) {
    const missing = tls.cert === undefined ? 'cert' : 'key';
    ctx.addIssue({ code: 'custom', path: [...path, 'tls', missing], message: `server "${name}" sets an mTLS ${missing === 'cert' ? 'key' : 'certificate'} without its ${missing}` });
  }
}
