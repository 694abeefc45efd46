import { readdirSync } from 'node:fs';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/*
 * DESIGN.md §1 as import rules (issue 24 §5). The request path, left to right:
 *
 *   transport → authn → session → router → policy → approvals (the catalog) → credentials → upstream
 *   → guards (egress checks) → audit
 *
 * A layer imports only layers to its right, never back up. The folders outside the picture sit where they
 * serve: the CLI and the listener's mounts (admin, and control behind admin and the CLI) left of authn;
 * governance, the router's call steps, right of the router; cedar with policy; vault with credentials; receipts
 * in front of audit, whose records they sum up; config and store beneath every layer.
 *
 * Each entry lists the folders one folder may import besides itself: the imports it has, each to its right
 * (or beneath it), and nothing more, so a new kind of import is a deliberate change here and in the folder's
 * README. Layers may also import SHARED. The foundation folders (`foundation: true`) may import only their own list.
 */

/** What every layer may import: the shared model, the helpers below every layer, and `redact/` (its README opens it to any layer). */
const SHARED = ['model', 'util', 'errors', 'jsonrpc', 'observability', 'redact'];

/**
 * `mayImport`: folders allowed whole. `exceptions`: imports that still cross a layer the wrong way (or that
 * issue 24 names as a leak) and cannot be fixed cheaply: each names the files it needs and why, and is
 * allowed for those files only.
 */
const LAYERS = {
  // The foundation: every layer stands on these, and they stand on nothing else.
  model: { foundation: true, mayImport: [] },
  jsonrpc: { foundation: true, mayImport: [] },
  redact: { foundation: true, mayImport: [] },
  errors: { foundation: true, mayImport: ['jsonrpc'] },
  util: { foundation: true, mayImport: ['errors'] },
  // Its subscribers (Server-Timing, metrics, traces) read the pipeline's channels (issue 24 §3, issue 26); the
  // metrics endpoint answers with the error catalogue's codes.
  observability: { foundation: true, mayImport: ['jsonrpc', 'redact', 'pipeline', 'errors'] },
  // Beneath every layer: the configuration schema and the control-plane store.
  config: { foundation: true, mayImport: ['errors', 'util'] },
  store: { foundation: true, mayImport: ['errors', 'util'] },

  // The commands: they build what they run, so they reach the layers they drive.
  cli: { mayImport: ['approvals', 'audit', 'authn', 'cluster', 'config', 'control', 'receipts', 'store', 'vault'] },
  transport: {
    mayImport: ['admin', 'authn', 'config', 'pipeline', 'router', 'session', 'vault'],
    exceptions: [
      {
        // Known exception (issue 24 "layering leaks"): the pass-through pre-flight probe is decided in the HTTP
        // server; it belongs in the pipeline's steps, which the lead's rewrite of the request path brings.
        folder: 'credentials',
        files: ['passthrough-gate.js'],
      },
    ],
  },
  admin: { mayImport: ['approvals', 'audit', 'authn', 'config', 'control', 'policy', 'receipts', 'store', 'vault'] },
  control: { mayImport: ['authn', 'cedar', 'config', 'policy', 'router', 'store', 'vault'] },
  authn: { mayImport: ['config', 'store'] },
  session: { mayImport: ['config'] },
  // The request context and the steps' names and tracing channels: what every request carries through the layers.
  pipeline: { mayImport: ['policy', 'session'] },
  router: {
    mayImport: ['approvals', 'cedar', 'config', 'credentials', 'governance', 'pipeline', 'policy', 'ratelimit', 'upstream'],
    exceptions: [
      {
        // Known exception: the router creates a legacy session at initialize and keeps per-session upstream state
        // (upstream sessions, subscriptions, the log level) on it; per-request data is on the RequestContext.
        folder: 'session',
      },
    ],
  },
  governance: {
    mayImport: ['approvals', 'audit', 'cedar', 'config', 'guards', 'receipts', 'store'],
    exceptions: [
      {
        // Known exception: build-governance.ts issues a receipt when a session ends and takes the session's type
        // for it; it is becoming a pure builder, with receipt issuance moving to receipts/ (issue 24 §6).
        folder: 'session',
        files: ['downstream-session.js'],
      },
    ],
  },
  policy: { mayImport: ['store'] },
  cedar: { mayImport: ['config'] },
  approvals: { mayImport: ['config', 'credentials', 'store', 'upstream'] },
  credentials: {
    mayImport: ['config', 'vault'],
    exceptions: [
      {
        // Known exception: the forwarding rule (DESIGN.md invariant 5) is authentication's, and the pass-through
        // gate checks an outgoing Authorization against it and names the gateway's resource metadata URL.
        folder: 'authn',
        files: ['credentials.js', 'resource-metadata.js'],
      },
      {
        // Known exception: the pass-through probe runs only to servers the caller may use (invariant 6), so the
        // gate asks the access policy; with the pipeline's authorize step it gets the decision instead.
        folder: 'policy',
        files: ['access-policy.js'],
      },
    ],
  },
  vault: { mayImport: ['config', 'store'] },
  upstream: { mayImport: ['config'] },
  guards: { mayImport: ['config'] },
  receipts: {
    mayImport: ['audit', 'config', 'store'],
    exceptions: [
      {
        // Known exception: the signing key is a secret value (`${ENV}` or a file) read as credentials read theirs.
        folder: 'credentials',
        files: ['secret-value.js'],
      },
    ],
  },
  audit: { mayImport: ['config', 'store'] },
  // A replica set's coordination over Redis (issue 27): it implements the session layer's relay and names the
  // control plane's changes, and only the composition root wires it in.
  cluster: { mayImport: ['config', 'control', 'session'] },
  // Rate limits (issue 27 §1): counters, local or in Redis; the router's `limit` step asks them.
  ratelimit: { mayImport: ['config'] },
};

// A folder without an entry would escape the rule: say where a new folder sits before it lands.
const folders = readdirSync(new URL('./src/', import.meta.url), { withFileTypes: true })
  .filter((entry) => entry.isDirectory())
  .map((entry) => entry.name);
const missing = folders.filter((folder) => !(folder in LAYERS));
if (missing.length > 0) throw new Error(`eslint.config.js: no layer rule for src/${missing.join(', src/')}`);

/**
 * pipeline/events.ts is where every layer publishes the facts metrics count (issue 26): it imports only types, so
 * importing it crosses no layer, and each layer may.
 */
const OPEN_TO_ALL = { pipeline: ['events.js'] };

function layerRule(folder) {
  const { foundation = false, mayImport, exceptions = [] } = LAYERS[folder];
  const allowed = new Set([folder, ...mayImport, ...(foundation ? [] : SHARED)]);
  const patterns = [];
  for (const other of Object.keys(LAYERS)) {
    if (allowed.has(other)) continue;
    const exception = exceptions.find((entry) => entry.folder === other);
    if (exception !== undefined && exception.files === undefined) continue;
    const open = [...(exception?.files ?? []), ...(OPEN_TO_ALL[other] ?? [])];
    const group = [`**/${other}/**`, ...open.map((file) => `!**/${other}/${file}`)];
    patterns.push({
      group,
      message: `src/${folder}/ may not import src/${other}/${exception === undefined ? '' : ` beyond ${exception.files.join(', ')}`} (DESIGN.md §1 layers; the allowed imports are in eslint.config.js and src/${folder}/README.md).`,
    });
  }
  const rules = [{ files: [`src/${folder}/**`], rules: { 'no-restricted-imports': ['error', { patterns, paths: METRICS_LIBRARY }] } }];
  // Flat config replaces a rule's options rather than merging them, so the subscriber's folder restates the layer.
  if (folder === 'observability') rules.push({ files: ['src/observability/metrics/**'], rules: { 'no-restricted-imports': ['error', { patterns }] } });
  return rules;
}

/** The core publishes facts and never imports a metrics library (issue 26): prom-client is the subscriber's alone. */
const METRICS_LIBRARY = [{ name: 'prom-client', message: 'prom-client lives in src/observability/metrics/ only (issue 26, decision 0019).' }];

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'bench/node_modules/**', 'bench/results/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', Buffer: 'readonly', URL: 'readonly', TextDecoder: 'readonly', TextEncoder: 'readonly', AbortController: 'readonly', AbortSignal: 'readonly', fetch: 'readonly', performance: 'readonly', queueMicrotask: 'readonly', structuredClone: 'readonly' },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': ['error', { selector: 'ExportAllDeclaration', message: 'Use named exports (STYLE.md §10).' }],
    },
  },
  ...Object.keys(LAYERS).flatMap(layerRule),
  { files: ['src/*.ts'], rules: { 'no-restricted-imports': ['error', { paths: METRICS_LIBRARY }] } },
);
