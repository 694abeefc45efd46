import { readdirSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { GatewayError } from '../errors/gateway-error.js';
import type { Logger } from '../observability/logger.js';
import { readBody } from '../util/read-body.js';
import { send } from './admin-api.js';
import { csrfOf, UI_COOKIE, uiCookieOf } from './ui-cookie.js';
import type { UiSessions } from './ui-sessions.js';

/**
 * Every answer under `/admin/ui` carries these (issue 28 §2). The policy allows the UI's own script and style
 * files and nothing else: no inline script or style, no other origin, no framing, no `<base>`, forms only to
 * itself. The UI renders every value as text (ui/src/dom.ts), and the policy is the second wall if it ever did not.
 */
export const UI_SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Content-Security-Policy': "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Referrer-Policy': 'no-referrer',
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Cache-Control': 'no-store',
};

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

/** The sign-in body: `{ "token": "…" }`; an admin token is at most a few hundred bytes. */
const MAX_SIGN_IN_BYTES = 4096;

/** Where `npm run build` puts the UI: dist/ui, beside dist/src. */
export const DEFAULT_UI_ASSETS = fileURLToPath(new URL('../../ui/', import.meta.url));

export interface AdminUiOptions {
  readonly sessions: UiSessions;
  /** Whether a presented token is the admin token (constant time, the admin API's own check). */
  readonly isAdminToken: (token: string) => boolean;
  /** Set `Secure` on the cookie: everywhere but a loopback listener, which browsers reach over plain http. */
  readonly secureCookie: boolean;
  readonly assetsDir?: string;
  readonly logger: Logger;
}

interface Asset {
  readonly type: string;
  readonly body: Buffer;
}

/**
 * The admin web UI (issue 28), at `/admin/ui/`: its files, read once at start-up from a fixed list (no path from a
 * request ever reaches the file system), and its sign-in. `POST /admin/ui/session` exchanges the admin token for an
 * `HttpOnly`, `SameSite=Strict` session cookie and a CSRF token; `GET` gives a signed-in page its CSRF token again;
 * `DELETE` signs out. Everything else the UI does is the admin API's, which accepts the cookie (admin-api.ts).
 */
export class AdminUi {
  readonly #options: AdminUiOptions;
  readonly #assets = new Map<string, Asset>();

  constructor(options: AdminUiOptions) {
    this.#options = options;
    const dir = options.assetsDir ?? DEFAULT_UI_ASSETS;
    let names: string[] = [];
    try {
      names = readdirSync(dir);
    } catch {
      options.logger.warn({ dir }, 'the admin UI is not built (npm run build): /admin/ui answers 404');
    }
    for (const name of names) {
      const type = TYPES[extname(name)];
      if (type !== undefined) this.#assets.set(name, { type, body: readFileSync(join(dir, name)) });
    }
  }

  /** `path` is what follows `/admin/ui`. */
  async handle(request: IncomingMessage, response: ServerResponse, path: string): Promise<void> {
    for (const [name, value] of Object.entries(UI_SECURITY_HEADERS)) response.setHeader(name, value);
    if (path === '/session') return this.#session(request, response);
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.writeHead(405, { Allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '') {
      // One canonical URL, so that relative asset paths resolve under /admin/ui/.
      response.writeHead(308, { Location: '/admin/ui/' }).end();
      return;
    }
    const name = path === '/' ? 'index.html' : path.slice(1);
    const asset = this.#assets.get(name);
    if (asset === undefined) {
      response.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('not found');
      return;
    }
    response.writeHead(200, { 'Content-Type': asset.type, 'Content-Length': asset.body.length });
    response.end(request.method === 'HEAD' ? undefined : asset.body);
  }

  async #session(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const { sessions } = this.#options;
    const cookie = uiCookieOf(request);
    switch (request.method) {
      case 'POST': {
        // A browser always sends Origin on a POST; the listener's guard has already checked it is the gateway's.
        // A JSON body cannot come from a cross-site form without a CORS preflight, which is never granted.
        if (request.headers.origin === undefined) throw new GatewayError('MCPGATE_ERR_ORIGIN_REJECTED', 'signing in needs an Origin header');
        if (!/^application\/json\b/i.test(request.headers['content-type'] ?? '')) {
          throw new GatewayError('MCPGATE_ERR_UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json');
        }
        const text = (await readBody(request, MAX_SIGN_IN_BYTES)).toString('utf8');
        let token: unknown;
        try {
          token = (JSON.parse(text) as { token?: unknown }).token;
        } catch {
          token = undefined;
        }
        if (typeof token !== 'string' || !this.#options.isAdminToken(token)) {
          this.#options.logger.warn({ adminUi: 'sign-in refused' }, 'admin UI sign-in refused');
          throw new GatewayError('MCPGATE_ERR_UNAUTHENTICATED', 'the admin token was not accepted');
        }
        if (cookie !== undefined) sessions.revoke(cookie);
        const issued = sessions.issue();
        this.#options.logger.info({ adminUi: 'signed in' }, 'admin UI sign-in');
        response.setHeader('Set-Cookie', this.#cookie(issued.id, issued.maxAgeSeconds));
        send(response, 200, { csrf: issued.csrf, expiresInSeconds: issued.maxAgeSeconds });
        return;
      }
      case 'GET': {
        const csrf = cookie === undefined ? undefined : sessions.csrfOf(cookie);
        if (csrf === undefined) throw new GatewayError('MCPGATE_ERR_UNAUTHENTICATED', 'not signed in');
        send(response, 200, { csrf });
        return;
      }
      case 'DELETE': {
        if (cookie === undefined || !sessions.validWithCsrf(cookie, csrfOf(request))) {
          throw new GatewayError('MCPGATE_ERR_ADMIN_FORBIDDEN', 'signing out needs the session cookie and its CSRF token');
        }
        sessions.revoke(cookie);
        this.#options.logger.info({ adminUi: 'signed out' }, 'admin UI sign-out');
        response.setHeader('Set-Cookie', this.#cookie('', 0));
        send(response, 200, { signedOut: true });
        return;
      }
      default:
        response.writeHead(405, { Allow: 'GET, POST, DELETE' }).end();
    }
  }

  #cookie(value: string, maxAgeSeconds: number): string {
    return `${UI_COOKIE}=${value}; Path=/admin; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${this.#options.secureCookie ? '; Secure' : ''}`;
  }
}
