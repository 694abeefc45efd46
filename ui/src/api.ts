/**
 * The UI's only way out: the admin API (`/admin/v1`) and its own sign-in (`/admin/ui/session`), on this origin,
 * with the session cookie. Every change carries the session's CSRF token, which lives in memory only.
 */
let csrf: string | undefined;

export class ApiError extends Error {
  readonly status: number;
  readonly code: string | undefined;

  constructor(status: number, message: string, code: string | undefined) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function call<T>(method: string, url: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET' && csrf !== undefined) headers['x-csrf-token'] = csrf;
  const response = await fetch(url, { method, headers, credentials: 'same-origin', ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await response.text();
  const parsed: unknown = text === '' ? {} : JSON.parse(text);
  if (!response.ok) {
    const error = (parsed as { error?: { message?: unknown; code?: unknown; data?: { code?: unknown } } }).error;
    const code = typeof error?.code === 'string' ? error.code : typeof error?.data?.code === 'string' ? error.data.code : undefined;
    throw new ApiError(response.status, typeof error?.message === 'string' ? error.message : `HTTP ${response.status}`, code);
  }
  return parsed as T;
}

export function admin<T>(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, body?: unknown): Promise<T> {
  return call<T>(method, `/admin/v1${path}`, body);
}

/** Whether this browser is signed in; on a reload, fetches the session's CSRF token again. */
export async function resume(): Promise<boolean> {
  try {
    csrf = (await call<{ csrf: string }>('GET', '/admin/ui/session')).csrf;
    return true;
  } catch {
    return false;
  }
}

export async function signIn(token: string): Promise<void> {
  csrf = (await call<{ csrf: string }>('POST', '/admin/ui/session', { token })).csrf;
}

export async function signOut(): Promise<void> {
  try {
    await call('DELETE', '/admin/ui/session');
  } finally {
    csrf = undefined;
  }
}
