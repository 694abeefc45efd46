import { isIP } from 'node:net';
import { Agent, request, type Dispatcher } from 'undici';
import { GatewayError } from '../errors/gateway-error.js';

/**
 * The HTTP side shared by the gateway's own token requests (client credentials, token exchange): where they may
 * go, how long they may take, how much they may read, and how failures are told without leaking.
 */

/** A JWT with many claims is a few KiB; anything near this is not a token response. */
export const MAX_TOKEN_RESPONSE_BYTES = 256 * 1024;

/** Used when a token response omits `expires_in` (RFC 6749 §5.1 only recommends it): short, so a stale token is not kept for long. */
export const DEFAULT_TOKEN_LIFETIME_MS = 60_000;

/** A token is never reused for longer than this, whatever `expires_in` claims. */
export const MAX_TOKEN_LIFETIME_MS = 24 * 60 * 60 * 1000;

export type TokenFailureReason = 'timeout' | 'network' | 'redirect' | 'http' | 'too-large' | 'malformed';

/** Which endpoint failed, in words a reader of the error understands. */
export type EndpointLabel = 'token endpoint' | 'STS';

export function tokenError(
  serverName: string,
  label: EndpointLabel,
  reason: TokenFailureReason,
  detail: string,
  extra: Record<string, unknown> = {},
): GatewayError {
  return new GatewayError('MCPGATE_ERR_UPSTREAM_TOKEN', `server "${serverName}": the ${label} ${detail}`, {
    data: { server: serverName, reason, ...extra },
  });
}

function isLoopbackHost(hostname: string): boolean {
  if (hostname === 'localhost' || hostname.endsWith('.localhost')) return true;
  const bare = hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
  if (isIP(bare) === 4) return bare.startsWith('127.');
  if (isIP(bare) === 6) return bare === '::1';
  return false;
}

/**
 * Refuses a token endpoint the gateway must not send a client secret or a caller's token to: plain http other
 * than loopback (anyone on the path would read them), user info in the URL (it would be sent and logged), and a
 * fragment (RFC 6749 §3.2). Throws `MCPGATE_ERR_CONFIG_INVALID` naming the field.
 */
export function checkTokenEndpoint(raw: string, serverName: string, field: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `servers.${serverName}.credentials.${field} is not a URL`);
  }
  const where = `servers.${serverName}.credentials.${field}`;
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopbackHost(url.hostname))) {
    throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `${where} must be https (plain http only to a loopback host)`);
  }
  if (url.username !== '' || url.password !== '') {
    throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `${where} must not carry user info; use clientId and clientSecret`);
  }
  if (url.hash !== '') throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `${where} must not have a fragment`);
  return url;
}

/** An own pool per token endpoint, so its connections are not shared with an upstream's (DESIGN.md invariant 1). */
export function tokenDispatcher(): Agent {
  return new Agent({ keepAliveTimeout: 10_000, connections: 4 });
}

/** RFC 6749 §2.3.1: id and secret are form-urlencoded before they are joined for Basic authentication. */
export function basicAuthorization(clientId: string, clientSecret: string): string {
  const encode = (value: string) => new URLSearchParams([['', value]]).toString().slice(1);
  return `Basic ${Buffer.from(`${encode(clientId)}:${encode(clientSecret)}`, 'utf8').toString('base64')}`;
}

export interface TokenPost {
  readonly url: URL;
  readonly form: URLSearchParams;
  /** Client authentication only (`authorization` for Basic); the caller's headers never come here. */
  readonly headers: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly dispatcher: Dispatcher;
  readonly serverName: string;
  readonly label: EndpointLabel;
}

/** Only a plain OAuth error code is repeated; a free-form field could reflect what was sent (a secret). */
function safeErrorCode(body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const code = (body as { error?: unknown }).error;
  return typeof code === 'string' && /^[a-z][a-z0-9_]{0,63}$/.test(code) ? code : undefined;
}

/** undici turns destroying an unread body into an 'error' event; nobody else listens, so it would be uncaught. */
function discard(body: Dispatcher.ResponseData['body']): void {
  body.on('error', () => undefined);
  body.destroy();
}

async function readBounded(body: Dispatcher.ResponseData['body'], post: TokenPost): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_TOKEN_RESPONSE_BYTES) {
      discard(body);
      throw tokenError(post.serverName, post.label, 'too-large', `sent a response larger than ${MAX_TOKEN_RESPONSE_BYTES} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * POSTs one form-encoded token request and returns the parsed JSON object of a 200 answer. Every failure is a
 * `MCPGATE_ERR_UPSTREAM_TOKEN` naming the server and the fault; the whole exchange (connect, headers, body) is
 * bounded by `timeoutMs`, and a redirect is never followed (it would replay the client credentials elsewhere).
 */
export async function postTokenRequest(post: TokenPost): Promise<Record<string, unknown>> {
  // An own timer rather than AbortSignal.timeout: cleared when the exchange ends, it holds nothing afterwards.
  const controller = new AbortController();
  const { signal } = controller;
  const timer = setTimeout(() => controller.abort(), post.timeoutMs);
  let text: string;
  let status: number;
  try {
    const response = await request(post.url, {
      method: 'POST',
      headers: {
        ...post.headers,
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
      },
      body: post.form.toString(),
      signal,
      dispatcher: post.dispatcher,
      headersTimeout: post.timeoutMs,
      bodyTimeout: post.timeoutMs,
    });
    status = response.statusCode;
    if (status >= 300 && status < 400) {
      discard(response.body);
      throw tokenError(post.serverName, post.label, 'redirect', `answered with a redirect (HTTP ${status}), which is not followed`, {
        status,
      });
    }
    text = await readBounded(response.body, post);
  } catch (error) {
    if (GatewayError.is(error)) throw error;
    const code = (error as { code?: unknown }).code;
    // undici's own header/body timers run with the same bound and may fire first; it is the same timeout.
    if (signal.aborted || (typeof code === 'string' && /^UND_ERR_(HEADERS|BODY|CONNECT)_TIMEOUT$/.test(code))) {
      throw tokenError(post.serverName, post.label, 'timeout', `did not answer within ${post.timeoutMs} ms`);
    }
    const detail = typeof code === 'string' && /^[A-Z_]{1,40}$/.test(code) ? ` (${code})` : '';
    throw tokenError(post.serverName, post.label, 'network', `could not be reached${detail}`);
  } finally {
    clearTimeout(timer);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (status !== 200) {
    const oauthError = safeErrorCode(body);
    throw tokenError(
      post.serverName,
      post.label,
      'http',
      `answered HTTP ${status}${oauthError === undefined ? '' : ` (${oauthError})`}`,
      oauthError === undefined ? { status } : { status, error: oauthError },
    );
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw tokenError(post.serverName, post.label, 'malformed', 'answered 200 with a body that is not a JSON object');
  }
  return body as Record<string, unknown>;
}

export interface IssuedToken {
  readonly accessToken: string;
  /** From `expires_in`; undefined when the response has none. */
  readonly lifetimeMs: number | undefined;
}

/** Visible ASCII: a token goes into an HTTP header, where a space, CR or LF would split or inject. */
const HEADER_SAFE = /^[\x21-\x7E]+$/;

/**
 * Checks the fields both grants share (RFC 6749 §5.1, RFC 8693 §2.2.1). `tokenTypes` are the accepted
 * `token_type` values, lower-case. Messages say which field is wrong, never its value (it may be the token).
 */
export function readIssuedToken(
  body: Record<string, unknown>,
  tokenTypes: readonly string[],
  serverName: string,
  label: EndpointLabel,
): IssuedToken {
  const malformed = (detail: string) => tokenError(serverName, label, 'malformed', `answered 200 but ${detail}`);
  const accessToken = body.access_token;
  if (typeof accessToken !== 'string' || accessToken.length === 0) throw malformed('without an access_token string');
  if (accessToken.length > 16_384 || !HEADER_SAFE.test(accessToken)) {
    throw malformed('with an access_token that cannot be sent in a header');
  }
  const tokenType = body.token_type;
  if (typeof tokenType !== 'string') throw malformed('without a token_type');
  if (!tokenTypes.includes(tokenType.toLowerCase())) {
    const shown = /^[A-Za-z0-9_.-]{1,32}$/.test(tokenType) ? `"${tokenType}"` : 'an unsupported value';
    throw malformed(`with token_type ${shown}; only ${tokenTypes.map((type) => (type === 'n_a' ? 'N_A' : 'Bearer')).join(' or ')} is supported`);
  }
  const expiresIn = body.expires_in;
  let lifetimeMs: number | undefined;
  if (expiresIn !== undefined) {
    // Some servers send the number as a decimal string; RFC 6749 means seconds either way.
    const seconds = typeof expiresIn === 'string' && /^[0-9]{1,10}$/.test(expiresIn) ? Number(expiresIn) : expiresIn;
    if (typeof seconds !== 'number' || !Number.isFinite(seconds) || seconds <= 0) {
      throw malformed('with an expires_in that is not a positive number');
    }
    lifetimeMs = Math.min(seconds * 1000, MAX_TOKEN_LIFETIME_MS);
  }
  return { accessToken, lifetimeMs };
}
