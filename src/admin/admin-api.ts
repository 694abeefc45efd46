import { verifyAudit } from '../audit/verify.js';
import { verifyReceipt } from '../receipts/receipt.js';
import { existingReceiptKey, receiptKeyOptions } from '../receipts/signing-key.js';
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CatalogGuard } from '../approvals/catalog-guard.js';
import { API_KEY_PREFIX } from '../authn/api-keys.js';
import { MIN_ADMIN_TOKEN_BYTES } from '../config/admin-schema.js';
import type { GatewayConfig } from '../config/schema.js';
import { ControlPlane, type ControlChange } from '../control/control-plane.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import type { PermissionEngine } from '../policy/permission-engine.js';
import type { Store } from '../store/store.js';
import { readBody } from '../util/read-body.js';
import type { Vault } from '../vault/vault.js';
import { buildRoutes, type AdminMount, type Handler, type HttpMethod, type Route, type RouteExtras } from './routes.js';
import { queryObject } from './schemas.js';
import { csrfOf, uiCookieOf } from './ui-cookie.js';
import { toolInventory } from './tool-inventory.js';
import type { UiSessions } from './ui-sessions.js';

/** Sent with every 401: a realm of its own, so a client never offers its gateway key here by habit. */
export const ADMIN_WWW_AUTHENTICATE = 'Bearer realm="mcpgate-admin"';

/** Admin bodies are small (the largest is a toolset or permission document); 1 MiB bounds them (invariant 9). */
const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

export interface AdminApiOptions {
  readonly store: Store;
  /** The API-key HMAC secret, for `POST /keys`. */
  readonly keySecret: string | Buffer;
  /** `gateway.admin.token`; `undefined` disables the API: every path answers 404. */
  readonly adminToken: string | undefined;
  /** For explain: tool naming and server filters. */
  readonly config: GatewayConfig;
  /** The gateway's own engine, so explain judges exactly as requests are judged. */
  readonly engine: PermissionEngine;
  readonly logger: Logger;
  /** Called after every mutation (the gateway drops memoised decisions on it). */
  readonly onChange: (change: ControlChange) => void;
  readonly maxBodyBytes?: number;
  readonly now?: () => Date;
  /** The per-user secret vault; without it `PUT …/secrets/:server` answers MCPGATE_ERR_VAULT_NOT_CONFIGURED. */
  readonly vault?: Vault;
  /** The gateway's approved-definitions guard; without it `GET /catalog/drift` reports mode "off" and no drift. */
  readonly catalog?: CatalogGuard;
  /** See `RouteExtras.flushAudit`. */
  readonly flushAudit?: () => Promise<void>;
  /** See `RouteExtras.approveTool`. */
  readonly approveTool?: RouteExtras['approveTool'];
  /** See `RouteExtras.receiptSettled`. */
  readonly receiptSettled?: RouteExtras['receiptSettled'];
  /** The admin UI's sessions (issue 28): their cookie is accepted beside the token, with a CSRF token on changes. */
  readonly uiSessions?: UiSessions;
}

const METHODS: readonly HttpMethod[] = ['GET', 'POST', 'PUT', 'DELETE'];

/**
 * The admin REST API (issue 5 §9), mounted by the HTTP server under `/admin/v1`. JSON in and out; every
 * operation is the control plane's (src/control), the same code the CLI runs. Guarded by the admin token alone:
 * gateway keys are principals of the data plane and are refused here with 403.
 */
export class AdminApi {
  readonly #tokenDigest: Buffer | undefined;
  readonly #routes: readonly Route[];
  readonly #logger: Logger;
  readonly #maxBodyBytes: number;
  readonly #uiSessions: UiSessions | undefined;

  constructor(options: AdminApiOptions) {
    this.#uiSessions = options.uiSessions;
    const token = options.adminToken === '' ? undefined : options.adminToken;
    // The schema already refuses these; a caller building the API without it must not get a guessable token.
    if (token !== undefined && (Buffer.byteLength(token, 'utf8') < MIN_ADMIN_TOKEN_BYTES || token.startsWith(API_KEY_PREFIX))) {
      throw new GatewayError('MCPGATE_ERR_CONFIG_INVALID', `gateway.admin.token must be at least ${MIN_ADMIN_TOKEN_BYTES} bytes and not a gateway key`);
    }
    // Only the digest is kept: comparing digests takes the same time whatever the presented token's length.
    this.#tokenDigest = token === undefined ? undefined : digest(token);
    this.#logger = options.logger;
    this.#maxBodyBytes = options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES;
    const control = new ControlPlane({
      store: options.store,
      keySecret: options.keySecret,
      config: options.config,
      engine: options.engine,
      onChange: options.onChange,
      ...(options.now === undefined ? {} : { now: options.now }),
      ...(options.vault === undefined ? {} : { vault: options.vault }),
    });
    const keyOptions = receiptKeyOptions(options.config.gateway);
    this.#routes = buildRoutes(control, {
      // Checkpoints and anchors are checked against the gateway's own signing key, as `audit verify` does.
      verifyReceipt: async (signedJson) => {
        const key = await existingReceiptKey(keyOptions);
        const result = verifyReceipt(signedJson, key === undefined ? {} : { publicKey: key.publicKeyPem });
        return result.ok ? { valid: true } : { valid: false, reason: result.reason };
      },
      verifyAudit: (chainId) => verifyAudit(options.store, { ...(chainId === undefined ? {} : { chainId }), verifier: () => existingReceiptKey(keyOptions) }),
      ...(options.catalog === undefined ? {} : { catalog: options.catalog }),
      inventory: (cachedTools) => toolInventory(options.config, options.catalog, cachedTools),
      ...(options.flushAudit === undefined ? {} : { flushAudit: options.flushAudit }),
      ...(options.approveTool === undefined ? {} : { approveTool: options.approveTool }),
      ...(options.receiptSettled === undefined ? {} : { receiptSettled: options.receiptSettled }),
    });
  }

  /** Whether `token` is the admin token; constant time. The admin UI's sign-in asks. */
  isAdminToken(token: string): boolean {
    return this.#tokenDigest !== undefined && timingSafeEqual(digest(token), this.#tokenDigest);
  }

  /** False when no admin token is configured; the API then answers 404 to everything. */
  get enabled(): boolean {
    return this.#tokenDigest !== undefined;
  }

  /**
   * Answers one request. `path` is what follows `/admin/v1` (query string optional; it is also read from
   * `request.url`); `mount` is the listener's view (`GET /status`). Never rejects: every failure becomes a JSON
   * error answer.
   */
  async handle(request: IncomingMessage, response: ServerResponse, path: string, mount: AdminMount = {}): Promise<void> {
    try {
      // Disabled answers before any credential check: without a token there is nothing to guess, and no route to learn.
      if (this.#tokenDigest === undefined) throw new GatewayError('MCPGATE_ERR_ADMIN_NOT_FOUND', 'not found');
      this.#authenticate(request);
      const url = new URL(request.url ?? '/', 'http://admin.invalid');
      const question = path.indexOf('?');
      const pathname = question < 0 ? path : path.slice(0, question);
      const query = queryObject(question < 0 ? url.searchParams : new URLSearchParams(path.slice(question + 1)));
      const { handler, params } = this.#match(pathname, request.method ?? 'GET');
      const result = await handler({ params, query, body: () => this.#readJson(request), mount });
      if (result.audit !== undefined) this.#logger.info({ adminAction: result.audit.action, ...result.audit.fields }, 'admin action');
      else this.#logger.debug({ adminRead: `${request.method ?? 'GET'} ${pathname}` }, 'admin read');
      send(response, result.status, result.body);
    } catch (error) {
      this.#fail(request, response, error);
    }
  }

  /** @throws GatewayError 401 (missing or wrong token) or 403 (a gateway key instead of the admin token). */
  #authenticate(request: IncomingMessage): void {
    const authorization = request.headers.authorization;
    const bearer = authorization === undefined ? undefined : /^Bearer +(\S+) *$/i.exec(authorization)?.[1];
    if (bearer !== undefined && this.#tokenDigest !== undefined && timingSafeEqual(digest(bearer), this.#tokenDigest)) return;
    // The admin UI's session (issue 28 §2). A change needs the session's CSRF token too: the cookie alone is what a
    // cross-site request would carry. SameSite=Strict keeps it off those already; the token does not rely on that.
    const cookie = bearer === undefined ? uiCookieOf(request) : undefined;
    if (cookie !== undefined && this.#uiSessions !== undefined) {
      const method = request.method ?? 'GET';
      if (method === 'GET' || method === 'HEAD') {
        if (this.#uiSessions.valid(cookie)) return;
      } else {
        if (this.#uiSessions.validWithCsrf(cookie, csrfOf(request))) return;
        if (this.#uiSessions.valid(cookie)) throw new GatewayError('MCPGATE_ERR_ADMIN_FORBIDDEN', 'a change through the admin UI needs its X-Csrf-Token header');
      }
    }
    if (bearer?.startsWith(API_KEY_PREFIX) === true || request.headers['x-mcpgate-key'] !== undefined) {
      throw new GatewayError(
        'MCPGATE_ERR_ADMIN_FORBIDDEN',
        'gateway API keys (mcpg_…) cannot manage the gateway; the admin API needs the admin credential (gateway.admin.token) as Authorization: Bearer <token>',
      );
    }
    throw new GatewayError('MCPGATE_ERR_UNAUTHENTICATED', 'the admin API needs the admin credential: Authorization: Bearer <gateway.admin.token>');
  }

  #match(pathname: string, method: string): { handler: Handler; params: Record<string, string> } {
    const segments = pathname.split('/').filter((segment) => segment !== '');
    for (const route of this.#routes) {
      const params = matchPattern(route.pattern, segments);
      if (params === undefined) continue;
      const handler = METHODS.includes(method as HttpMethod) ? route.methods[method as HttpMethod] : undefined;
      if (handler === undefined) {
        const allow = METHODS.filter((m) => route.methods[m] !== undefined).join(', ');
        throw new GatewayError('MCPGATE_ERR_ADMIN_METHOD_NOT_ALLOWED', `${method} is not allowed here; use ${allow}`, { data: { allow } });
      }
      return { handler, params };
    }
    throw new GatewayError('MCPGATE_ERR_ADMIN_NOT_FOUND', `no admin route ${pathname}`);
  }

  async #readJson(request: IncomingMessage): Promise<unknown> {
    const body = await readBody(request, this.#maxBodyBytes);
    if (body.length === 0) return undefined;
    const type = request.headers['content-type']?.toLowerCase().split(';')[0]?.trim();
    if (type !== 'application/json') {
      throw new GatewayError('MCPGATE_ERR_UNSUPPORTED_MEDIA_TYPE', 'admin request bodies must be Content-Type: application/json');
    }
    try {
      return JSON.parse(body.toString('utf8'));
    } catch {
      throw new GatewayError('MCPGATE_ERR_PARSE', 'the body is not valid JSON');
    }
  }

  #fail(request: IncomingMessage, response: ServerResponse, error: unknown): void {
    const known = GatewayError.is(error);
    const code = known ? error.code : 'MCPGATE_ERR_INTERNAL';
    const status = known ? error.httpStatus : 500;
    const fields = { adminPath: request.url?.split('?')[0], method: request.method, code, status };
    if (!known) this.#logger.error({ ...fields, err: error }, 'admin request failed');
    else if (status === 401 || status === 403) this.#logger.warn(fields, 'admin request refused');
    else this.#logger.info(fields, 'admin request failed');
    const headers: Record<string, string> = {};
    if (status === 401) headers['WWW-Authenticate'] = ADMIN_WWW_AUTHENTICATE;
    if (status === 405 && known && typeof error.data?.allow === 'string') headers.Allow = error.data.allow;
    // An unknown error's message may hold internals; only the log sees it.
    const message = known ? error.message : 'Internal error';
    send(response, status, { error: { code, message } }, headers);
  }
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}

function matchPattern(pattern: readonly string[], segments: readonly string[]): Record<string, string> | undefined {
  if (pattern.length !== segments.length) return undefined;
  const params: Record<string, string> = {};
  for (const [index, part] of pattern.entries()) {
    const segment = segments[index] ?? '';
    if (part.startsWith(':')) {
      let value: string;
      try {
        value = decodeURIComponent(segment);
      } catch {
        throw new GatewayError('MCPGATE_ERR_ADMIN_INVALID', `path segment "${segment}" is not valid percent-encoding`);
      }
      params[part.slice(1)] = value;
    } else if (part !== segment) return undefined;
  }
  return params;
}

/** A JSON answer that no cache keeps; the admin UI's sign-in answers with it too. */
export function send(response: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  if (response.headersSent) {
    response.end();
    return;
  }
  const body = JSON.stringify(value);
  response.writeHead(status, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    // Answers may hold a new key or the shape of the permission model: no cache may keep them.
    'Cache-Control': 'no-store',
    ...headers,
  });
  response.end(body);
}
