import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { connect, type TLSSocket } from 'node:tls';
import { pinsOfCertificate } from '../util/tls-pins.js';

export interface PinIo {
  readonly stdout: (line: string) => void;
  readonly stderr: (line: string) => void;
}

export interface PinOptions {
  /** PEM file of the CA bundle to verify against (as `tls.ca` in the config), instead of Node's roots. */
  readonly ca?: string;
  readonly timeoutMs?: number;
}

/**
 * `mcpgate pin <https-url>` (issue 4 §3): connects, and prints both pin forms of the live leaf certificate for
 * operators to paste into `tls.pin` / `tls.spkiPin`, with its subject, issuer, validity, and whether normal CA
 * verification succeeded. The pins are printed even when verification fails, flagged, because the operator may
 * be about to configure the `ca` that makes it pass; the gateway itself never skips CA verification.
 *
 * Exit codes: 0 when a certificate was read; 1 on a bad URL, an unreadable `--ca` file, or a connection error.
 */
export async function runPin(target: string, options: PinOptions, io: PinIo): Promise<number> {
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    io.stderr(`not a URL: ${target}`);
    return 1;
  }
  if (url.protocol !== 'https:') {
    io.stderr(`mcpgate pin needs an https:// URL (got ${url.protocol}//)`);
    return 1;
  }
  let ca: Buffer | undefined;
  if (options.ca !== undefined) {
    try {
      ca = await readFile(options.ca);
    } catch (error) {
      io.stderr(`cannot read --ca ${options.ca}: ${(error as Error).message}`);
      return 1;
    }
  }
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  const port = url.port === '' ? 443 : Number(url.port);
  let socket: TLSSocket;
  try {
    socket = await handshake(host, port, ca, options.timeoutMs ?? 10_000);
  } catch (error) {
    io.stderr(`cannot connect to ${url.origin}: ${(error as Error).message}`);
    return 1;
  }
  try {
    const raw = socket.getPeerCertificate(true).raw as Buffer | undefined;
    if (raw === undefined || raw.length === 0) {
      io.stderr(`${url.origin} presented no certificate`);
      return 1;
    }
    const certificate = new X509Certificate(raw);
    const pins = pinsOfCertificate(raw);
    io.stdout(`server:      ${url.origin}`);
    io.stdout(`subject:     ${oneLine(certificate.subject)}`);
    io.stdout(`issuer:      ${oneLine(certificate.issuer)}`);
    io.stdout(`valid from:  ${certificate.validFrom}`);
    io.stdout(`valid to:    ${certificate.validTo}`);
    if (socket.authorized) {
      io.stdout('CA verification: ok');
    } else {
      const reason = String(socket.authorizationError ?? 'unknown reason');
      io.stdout(`CA verification: FAILED (${reason}) -- the gateway will refuse this certificate until that is fixed (e.g. tls.ca), pin or not`);
    }
    io.stdout(`pin:         ${pins.cert}`);
    io.stdout(`spkiPin:     ${pins.spki}`);
    return 0;
  } finally {
    socket.destroy();
  }
}

/**
 * Completes a TLS handshake without rejecting an unverified peer, so that its certificate can be shown; the
 * verification result stays available as `authorized` / `authorizationError`. SNI is the URL's host, unless it
 * is an IP address (RFC 6066 §3 forbids IP literals in SNI); the identity check still covers IPs.
 */
function handshake(host: string, port: number, ca: Buffer | undefined, timeoutMs: number): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, servername: isIP(host) === 0 ? host : undefined, ca, rejectUnauthorized: false });
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no TLS handshake within ${timeoutMs} ms`)));
    socket.once('secureConnect', () => {
      socket.setTimeout(0);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

function oneLine(distinguishedName: string): string {
  return distinguishedName.split('\n').filter((part) => part !== '').join(', ');
}
