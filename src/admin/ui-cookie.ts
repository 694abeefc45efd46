import type { IncomingMessage } from 'node:http';

/** The admin UI's session cookie (issue 28 §2). `__Host-` cannot be used: the gateway may be reached over plain http on loopback. */
export const UI_COOKIE = 'mcpgate_admin';

const PATTERN = new RegExp(`(?:^|;\\s*)${UI_COOKIE}=([A-Za-z0-9_-]{1,128})(?:;|$)`);

/** The CSRF token a change through the UI carries (`X-Csrf-Token`), if any. */
export function csrfOf(request: IncomingMessage): string | undefined {
  const value = request.headers['x-csrf-token'];
  return Array.isArray(value) ? value[0] : value;
}

/** The session id a request's Cookie header carries, if any. */
export function uiCookieOf(request: IncomingMessage): string | undefined {
  const header = request.headers.cookie;
  return header === undefined ? undefined : PATTERN.exec(header)?.[1];
}
