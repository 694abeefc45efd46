/**
 * Issue 28 §1-2: the admin web UI's files and sign-in, against a real gateway process on a real SQLite store. The
 * admin token is exchanged for an HttpOnly, SameSite=Strict cookie and a CSRF token; the admin API accepts the
 * cookie for reads and, with the CSRF token, for changes; a cross-site request is refused; signing out revokes the
 * session; every answer under /admin/ui carries the Content-Security-Policy; without an admin token there is no UI.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AccessStore } from '../fixtures/integration/access-store.js';
import { cleanup, productionGateway, raw, ROOT, startGateway, stdioFixture, tempPath, type Gateway, type RawResponse } from '../integration/harness.js';

const ADMIN_TOKEN = randomBytes(32).toString('hex');
let access: AccessStore;
let gateway: Gateway;
let principalId: string;

before(async () => {
  const store = tempPath('ui.db');
  access = await AccessStore.open(store);
  await access.permit('org', await access.org('acme'), { kind: 'allow' });
  principalId = (await access.key({ org: 'acme', name: 'alice' })).principalId;
  gateway = await startGateway({
    gateway: { ...productionGateway(store, ADMIN_TOKEN), receipts: { enabled: false } },
    servers: { fx: stdioFixture('fx', { extra: { allowUnmeasured: true } }) },
  });
});

after(async () => {
  await cleanup();
  await access?.close();
});

function ui(path: string, init: Parameters<typeof raw>[1] = {}): Promise<RawResponse> {
  return raw(`${gateway.origin}/admin/ui${path}`, init);
}

function header(response: RawResponse, name: string): string {
  const value = response.headers[name];
  return Array.isArray(value) ? value.join(', ') : (value ?? '');
}

async function signIn(token = ADMIN_TOKEN, origin = gateway.origin): Promise<{ cookie: string; csrf: string; response: RawResponse }> {
  const response = await ui('/session', { method: 'POST', headers: { 'content-type': 'application/json', origin }, body: JSON.stringify({ token }) });
  const setCookie = header(response, 'set-cookie');
  const cookie = /^(mcpgate_admin=[^;]+)/.exec(setCookie)?.[1] ?? '';
  const csrf = response.status === 200 ? String((response.json() as { csrf?: unknown }).csrf) : '';
  return { cookie, csrf, response };
}

describe('the admin UI (issue 28)', () => {
  it('serves its files with a strict Content-Security-Policy and no framing, on every answer', async () => {
    const files = readdirSync(join(ROOT, 'dist/ui'));
    assert.ok(files.includes('index.html') && files.includes('app.js'));
    for (const path of ['/', '/app.js', '/app.css', '/dom.js', '/no-such-file.js', '/..%2f..%2fsrc%2fmain.js']) {
      const response = await ui(path, { method: 'GET' });
      const csp = header(response, 'content-security-policy');
      assert.match(csp, /default-src 'none'/, path);
      assert.match(csp, /script-src 'self'(;|$)/, path);
      assert.match(csp, /frame-ancestors 'none'/, path);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, path);
      assert.equal(header(response, 'x-frame-options'), 'DENY');
      assert.equal(header(response, 'x-content-type-options'), 'nosniff');
    }
    assert.equal((await ui('/', { method: 'GET' })).status, 200);
    assert.match(header(await ui('/app.js', { method: 'GET' }), 'content-type'), /^text\/javascript/);
    assert.equal((await ui('/..%2f..%2fsrc%2fmain.js', { method: 'GET' })).status, 404, 'no request path reaches the file system');
  });

  it('the page has no inline script or style: the policy would refuse them', () => {
    const html = readFileSync(join(ROOT, 'dist/ui/index.html'), 'utf8');
    assert.doesNotMatch(html, /<script(?![^>]*\ssrc=)[^>]*>/);
    assert.doesNotMatch(html, /\sstyle=|<style|\son[a-z]+=/i);
  });

  it('renders values as text only: no UI source writes HTML', () => {
    for (const file of readdirSync(join(ROOT, 'ui/src'))) {
      const source = readFileSync(join(ROOT, 'ui/src', file), 'utf8');
      assert.doesNotMatch(source, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|createContextualFragment|srcdoc/, file);
    }
  });

  it('exchanges the admin token for an HttpOnly, SameSite=Strict session cookie; refuses a wrong token and a request without Origin', async () => {
    const wrong = await signIn(randomBytes(32).toString('hex'));
    assert.equal(wrong.response.status, 401);
    assert.equal(header(wrong.response, 'set-cookie'), '');
    const noOrigin = await ui('/session', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: ADMIN_TOKEN }) });
    assert.equal(noOrigin.status, 403);
    const form = await ui('/session', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: gateway.origin }, body: `token=${ADMIN_TOKEN}` });
    assert.equal(form.status, 415, 'a cross-site form cannot sign in');

    const { response, cookie, csrf } = await signIn();
    assert.equal(response.status, 200);
    const setCookie = header(response, 'set-cookie');
    assert.match(setCookie, /; HttpOnly/);
    assert.match(setCookie, /; SameSite=Strict/);
    assert.match(setCookie, /; Path=\/admin/);
    assert.match(setCookie, /; Max-Age=\d+/);
    assert.doesNotMatch(setCookie, /; Secure/, 'a loopback listener is plain http');
    assert.ok(!setCookie.includes(ADMIN_TOKEN) && cookie.length > 'mcpgate_admin='.length);
    assert.ok(csrf.length >= 32);
  });

  it('the cookie reads the admin API; a change needs its CSRF token; nothing works without the cookie', async () => {
    const { cookie, csrf } = await signIn();
    assert.equal((await raw(`${gateway.origin}/admin/v1/status`, { method: 'GET' })).status, 401);
    assert.equal((await raw(`${gateway.origin}/admin/v1/status`, { method: 'GET', headers: { cookie } })).status, 200);
    assert.equal((await raw(`${gateway.origin}/admin/v1/status`, { method: 'GET', headers: { cookie: 'mcpgate_admin=forged' } })).status, 401);
    const body = JSON.stringify({ principalId, label: 'from the ui' });
    const withoutCsrf = await raw(`${gateway.origin}/admin/v1/keys`, { headers: { cookie, 'content-type': 'application/json', origin: gateway.origin }, body });
    assert.equal(withoutCsrf.status, 403);
    const wrongCsrf = await raw(`${gateway.origin}/admin/v1/keys`, { headers: { cookie, 'content-type': 'application/json', origin: gateway.origin, 'x-csrf-token': 'x'.repeat(43) }, body });
    assert.equal(wrongCsrf.status, 403);
    const created = await raw(`${gateway.origin}/admin/v1/keys`, { headers: { cookie, 'content-type': 'application/json', origin: gateway.origin, 'x-csrf-token': csrf }, body });
    assert.equal(created.status, 201, created.body);
    // A reloaded page gets its CSRF token again with the cookie, and only with it.
    assert.equal((await ui('/session', { method: 'GET', headers: { cookie } })).json().csrf, csrf);
    assert.equal((await ui('/session', { method: 'GET' })).status, 401);
  });

  it('refuses a cross-site request even with the cookie and the CSRF token', async () => {
    const { cookie, csrf } = await signIn();
    const crossSite = await raw(`${gateway.origin}/admin/v1/keys`, {
      headers: { cookie, 'content-type': 'application/json', origin: 'https://attacker.example', 'x-csrf-token': csrf },
      body: JSON.stringify({ principalId }),
    });
    assert.equal(crossSite.status, 403);
    assert.equal((await signIn(ADMIN_TOKEN, 'https://attacker.example')).response.status, 403);
  });

  it('signing out revokes the session: its cookie reads nothing after', async () => {
    const { cookie, csrf } = await signIn();
    assert.equal((await ui('/session', { method: 'DELETE', headers: { cookie, origin: gateway.origin } })).status, 403, 'sign-out needs the CSRF token');
    const out = await ui('/session', { method: 'DELETE', headers: { cookie, origin: gateway.origin, 'x-csrf-token': csrf } });
    assert.equal(out.status, 200);
    assert.match(header(out, 'set-cookie'), /Max-Age=0/);
    assert.equal((await raw(`${gateway.origin}/admin/v1/status`, { method: 'GET', headers: { cookie } })).status, 401);
    assert.equal((await ui('/session', { method: 'GET', headers: { cookie } })).status, 401);
  });
});

describe('without an admin token', () => {
  it('there is no UI', async () => {
    const store = tempPath('ui-off.db');
    const off = await AccessStore.open(store);
    await off.close();
    const plain = await startGateway({ gateway: { mode: 'production', store, auth: { mode: 'apiKey', keySecret: 'test-key-secret-0123456789abcdef0123456789abcdef' }, receipts: { enabled: false } }, servers: {} }, { name: 'ui-off' });
    for (const path of ['/admin/ui/', '/admin/ui/app.js', '/admin/ui/session']) assert.equal((await raw(`${plain.origin}${path}`, { method: 'GET' })).status, 404, path);
  });
});
