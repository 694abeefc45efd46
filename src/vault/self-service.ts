import type { IncomingMessage, ServerResponse } from 'node:http';
import { z } from 'zod';
import type { GatewayConfig } from '../config/schema.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import { readBody } from '../util/read-body.js';
import { requirePerUserServer } from './servers.js';
import type { Vault } from './vault.js';

/** A secret is at most 8 KiB; JSON escaping can grow it, and 64 KiB still bounds the read (invariant 9). */
const DEFAULT_MAX_BODY_BYTES = 64 * 1024;

/** Strict: a misspelt field is refused rather than a secret silently not stored. The length rule is the vault's. */
const putBody = z.strictObject({ secret: z.string() });

/** Who is calling, as the authenticator established it from the caller's own key or token. */
export interface SelfServiceCaller {
  readonly principalId: string;
}

export interface SelfServiceSecretsOptions {
  readonly vault: Vault;
  /** The configuration in force, read per request so a reload that adds or drops a per-user server applies at once. */
  readonly config: GatewayConfig | (() => GatewayConfig);
  readonly logger?: Logger;
  readonly maxBodyBytes?: number;
}

/** One request's outcome before it is written. */
interface Answer {
  readonly status: number;
  readonly body: unknown;
}

/**
 * `/v1/secrets`: a principal manages its own per-user secrets with its own gateway credential (issue 6 §2).
 * The HTTP server authenticates first and passes the caller; every operation is scoped to `caller.principalId`,
 * so no path, body or query can reach another principal's secret. Values go in and never come out.
 *
 * - `GET /v1/secrets` → `200 { secrets: [{ server, updatedAt }] }`
 * - `GET /v1/secrets/<server>` → `200 { server, set: true, updatedAt, keyId, currentKey }` or `{ server, set: false }`:
 *   the caller's own status for one server (issue 22 B8); `currentKey` is false when the secret was sealed by a
 *   master key rotated away, so it must be set again. An unknown server, or one that takes no per-user secret and
 *   holds none, is refused as PUT refuses it
 * - `PUT /v1/secrets/<server>` with `{ "secret": "…" }` → `200 { server, updatedAt }` (per-user servers only)
 * - `DELETE /v1/secrets/<server>` → `200 { server, deleted: true }`, or 404 when none is stored
 */
export class SelfServiceSecrets {
  readonly #vault: Vault;
  readonly #config: () => GatewayConfig;
  readonly #logger: Logger | undefined;
  readonly #maxBodyBytes: number;

  constructor(options: SelfServiceSecretsOptions) {
    this.#vault = options.vault;
    const { config } = options;
    this.#config = typeof config === 'function' ? config : () => config;
    this.#logger = options.logger;
    this.#maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
  }

  /**
   * Answers one request. `path` is what follows `/v1/secrets` (`''`, `/` or `/<server>`, query string ignored).
   * Never rejects: every failure becomes `{ error: { code, message } }` with the error's status.
   */
  async handle(request: IncomingMessage, response: ServerResponse, caller: SelfServiceCaller, path: string): Promise<void> {
    try {
      send(response, await this.#route(request, caller, path));
    } catch (error) {
      // An unread body must not be left in the socket for the next request on the connection.
      if (!request.readableEnded) request.resume();
      this.#fail(request, response, caller, error);
    }
  }

  async #route(request: IncomingMessage, caller: SelfServiceCaller, path: string): Promise<Answer> {
    const principalId = caller.principalId;
    if (typeof principalId !== 'string' || principalId === '') {
      throw new GatewayError('MCPGATE_ERR_UNAUTHENTICATED', 'managing your secrets needs your own gateway credential');
    }
    const segments = (path.split('?')[0] ?? '').split('/').filter((segment) => segment !== '');
    const method = request.method ?? 'GET';
    if (segments.length === 0) {
      if (method !== 'GET') throw methodNotAllowed(method, 'GET');
      const secrets = (await this.#vault.list(principalId)).map((meta) => ({ server: meta.server, updatedAt: meta.updatedAt }));
      return { status: 200, body: { secrets } };
    }
    if (segments.length !== 1) throw new GatewayError('MCPGATE_ERR_INVALID_REQUEST', 'no such path; use /v1/secrets or /v1/secrets/<server>', { httpStatus: 404 });
    const server = decodeSegment(segments[0] ?? '');
    if (method === 'PUT') {
      // Refused before the body is read: a secret meant for a server that does not take one is never stored.
      requirePerUserServer(this.#config(), server);
      const { secret } = parseBody(await this.#readJson(request));
      const meta = await this.#vault.set(principalId, server, secret);
      this.#logger?.info({ selfService: 'secret.set', principalId, server, keyId: meta.keyId }, 'per-user secret set');
      return { status: 200, body: { server: meta.server, updatedAt: meta.updatedAt } };
    }
    if (method === 'GET') {
      // Metadata only, never the value: this answers "have I linked this account?" and "under which key?".
      const meta = (await this.#vault.list(principalId)).find((entry) => entry.server === server);
      if (meta === undefined) {
        requirePerUserServer(this.#config(), server);
        return { status: 200, body: { server, set: false } };
      }
      return { status: 200, body: { server, set: true, updatedAt: meta.updatedAt, keyId: meta.keyId, currentKey: meta.keyId === this.#vault.keyId } };
    }
    if (method === 'DELETE') {
      // Allowed for any server name: a secret left behind by a server that is no longer per-user stays removable.
      if (!(await this.#vault.delete(principalId, server))) {
        throw new GatewayError('MCPGATE_ERR_STORE_NOT_FOUND', `you have no secret stored for server "${server}"`, { data: { entity: 'secret', server } });
      }
      this.#logger?.info({ selfService: 'secret.delete', principalId, server }, 'per-user secret deleted');
      return { status: 200, body: { server, deleted: true } };
    }
    throw methodNotAllowed(method, 'GET, PUT, DELETE');
  }

  async #readJson(request: IncomingMessage): Promise<unknown> {
    const type = request.headers['content-type']?.toLowerCase().split(';')[0]?.trim();
    if (type !== 'application/json') throw new GatewayError('MCPGATE_ERR_UNSUPPORTED_MEDIA_TYPE', 'the body must be Content-Type: application/json');
    const body = await readBody(request, this.#maxBodyBytes);
    try {
      return JSON.parse(body.toString('utf8'));
    } catch {
      // JSON.parse's message quotes the input, which is the secret: never pass it on.
      throw new GatewayError('MCPGATE_ERR_PARSE', 'the body is not valid JSON');
    }
  }

  #fail(request: IncomingMessage, response: ServerResponse, caller: SelfServiceCaller, error: unknown): void {
    const known = GatewayError.is(error);
    const code = known ? error.code : 'MCPGATE_ERR_INTERNAL';
    const status = known ? error.httpStatus : 500;
    const fields = { selfServicePath: request.url?.split('?')[0], method: request.method, principalId: caller.principalId, code, status };
    if (!known) this.#logger?.error({ ...fields, err: error }, 'secrets request failed');
    else this.#logger?.info(fields, 'secrets request failed');
    const headers: Record<string, string> = {};
    if (status === 405 && known && typeof error.data?.allow === 'string') headers.Allow = error.data.allow;
    send(response, { status, body: { error: { code, message: known ? error.message : 'Internal error' } } }, headers);
  }
}

function parseBody(value: unknown): { secret: string } {
  const parsed = putBody.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const at = issue === undefined || issue.path.length === 0 ? '' : ` at ${issue.path.map(String).join('.')}`;
  // zod's messages name types and keys, never the value, so the secret cannot echo back.
  throw new GatewayError('MCPGATE_ERR_INVALID_PARAMS', `the body must be {"secret": "<your secret>"}${at}: ${issue?.message ?? 'invalid'}`);
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new GatewayError('MCPGATE_ERR_INVALID_REQUEST', 'the server name in the path is not valid percent-encoding');
  }
}

function methodNotAllowed(method: string, allow: string): GatewayError {
  return new GatewayError('MCPGATE_ERR_INVALID_REQUEST', `${method} is not allowed here; use ${allow}`, { httpStatus: 405, data: { allow } });
}

function send(response: ServerResponse, answer: Answer, headers: Record<string, string> = {}): void {
  if (response.headersSent) {
    response.end();
    return;
  }
  const body = JSON.stringify(answer.body);
  response.writeHead(answer.status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    // The list says which upstream accounts a principal has linked; no shared cache may keep it.
    'Cache-Control': 'no-store',
    ...headers,
  });
  response.end(body);
}
