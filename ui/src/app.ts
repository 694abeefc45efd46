import { ApiError, resume, signOut } from './api.js';
import { showAudit } from './audit.js';
import { showTools } from './tools.js';
import { showExplain } from './explain.js';
import { el, show } from './dom.js';
import { showKeys } from './keys.js';
import { showOverview } from './overview.js';
import { showPrincipals } from './principals.js';
import { showSessions } from './sessions.js';
import { showSignIn } from './sign-in.js';
import { showTester } from './tester.js';

/** The admin UI (issue 28): one page, sections by `#/name`, every figure from the admin API. */
const PAGES: Readonly<Record<string, () => Promise<void>>> = {
  '#/overview': showOverview,
  '#/keys': () => showKeys(),
  '#/principals': () => showPrincipals(),
  '#/audit': () => showAudit(),
  '#/tools': () => showTools(),
  // The section's first name, kept so that bookmarks still open it.
  '#/approvals': () => showTools(),
  '#/explain': () => showExplain(),
  '#/tester': () => Promise.resolve(showTester()),
  '#/sessions': showSessions,
};

function nav(): HTMLElement | null {
  return document.getElementById('nav');
}

async function route(): Promise<void> {
  const page = PAGES[location.hash] ?? showOverview;
  try {
    await page();
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      signedOut();
      return;
    }
    show(el('h1', {}, 'Something went wrong'), el('p', { class: 'error', role: 'alert' }, String(error)));
  }
}

function signedOut(): void {
  const links = nav();
  if (links !== null) links.hidden = true;
  showSignIn(signedIn);
}

function signedIn(): void {
  const links = nav();
  if (links !== null) links.hidden = false;
  void route();
}

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('sign-out')?.addEventListener('click', () => {
    void signOut().finally(signedOut);
  });
  window.addEventListener('hashchange', () => void route());
  void resume().then((ok) => (ok ? signedIn() : signedOut()));
});
