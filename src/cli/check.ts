import { readFile } from 'node:fs/promises';
import { catalogSource, loadGatewayCatalog } from '../approvals/catalog-source.js';
import { ConfigError, formatConfigIssue, type ConfigIssue } from '../config/config-error.js';
import { loadConfig, locateIssue } from '../config/load.js';
import type { GatewayConfig } from '../config/schema.js';
import { unmeasuredStdioIssues } from '../config/spawn-policy.js';
import { GatewayError } from '../errors/gateway-error.js';
import { keySecretIssues, keySecretOptions } from '../authn/key-secret.js';
import { receiptKeyIssues, receiptKeyOptions, signsWithKey } from '../receipts/signing-key.js';
import { opensControlStore } from '../store/create-store.js';
import { resultHasher } from '../audit/result-hash.js';

export interface CheckIo {
  /** Variables for `${VAR}` interpolation (normally `process.env`). */
  readonly env: NodeJS.ProcessEnv;
  readonly stdout: (line: string) => void;
  readonly stderr: (line: string) => void;
}

/**
 * `mcpgate check <file>`: validates a configuration file without starting anything.
 *
 * Exit codes: 0 when valid (one summary line on stdout, `ok: N servers (a, b)`); 1 when invalid or when it
 * refers to unset variables (one `<file>:<line>:<col>: <path>: <message>` line per issue on stderr, in the
 * format editors and CI annotators already parse); 2 when the file cannot be read.
 * Besides the schema it checks what `serve` would refuse at start-up before serving anything: stdio servers that
 * could never be spawned, approvals (`catalog.source: file`) that are missing in `pinned` mode or invalid, and
 * the keys a PostgreSQL store needs configured (`auth.keySecret`, `receipts.signingKey`) or a signing key that
 * cannot be read, and an audit result digest (`blake3`) whose binding does not load here.
 * Errors other than configuration errors are bugs and propagate.
 */
export async function runCheck(file: string, io: CheckIo): Promise<number> {
  try {
    const config = await loadConfig(file, { env: io.env });
    // A production config with an unmeasured stdio server loads, but could never spawn it (issue 4 §4).
    const issues = [...unmeasuredStdioIssues(config), ...(await approvalsIssues(config)), ...(await sharedKeyIssues(config)), ...resultHashIssues(config)];
    if (issues.length > 0) {
      const text = await readFile(file, 'utf8');
      const located = issues.map((issue) => locateIssue(text, file, issue));
      throw new ConfigError('MCPGATE_ERR_CONFIG_INVALID', located, file);
    }
    const names = Object.keys(config.servers);
    const noun = names.length === 1 ? 'server' : 'servers';
    io.stdout(names.length === 0 ? `ok: 0 servers` : `ok: ${names.length} ${noun} (${names.join(', ')})`);
    return 0;
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    for (const issue of error.issues) io.stderr(formatConfigIssue(file, issue));
    return error.code === 'MCPGATE_ERR_CONFIG_READ' ? 2 : 1;
  }
}

/**
 * The secrets `serve` resolves when it opens the store (with API keys, or whenever `gateway.store` is set): the
 * API-key secret, and the signing key when anything is signed. Stop 37 found `check` passing a PostgreSQL config
 * that `serve` then refused for want of `receipts.signingKey`. No key file is created and no store is opened.
 */
async function sharedKeyIssues(config: GatewayConfig): Promise<ConfigIssue[]> {
  const { gateway } = config;
  if (!opensControlStore(gateway)) return [];
  const secret = gateway.auth.mode !== 'none' ? keySecretIssues(keySecretOptions(gateway)) : [];
  const signing = signsWithKey(gateway) ? await receiptKeyIssues(receiptKeyOptions(gateway)) : [];
  return [...secret, ...signing];
}

/** The audit's result digest where its native binding does not load: `serve` would refuse to start (decision 0031). */
function resultHashIssues(config: GatewayConfig): ConfigIssue[] {
  const { gateway } = config;
  if (!opensControlStore(gateway) || !gateway.audit.enabled) return [];
  try {
    resultHasher(gateway.audit.resultHash);
    return [];
  } catch (error) {
    if (!GatewayError.is(error) || error.code !== 'MCPGATE_ERR_CONFIG_INVALID') throw error;
    return [{ path: 'gateway.audit.resultHash', message: error.message }];
  }
}

/**
 * The approvals file as the gateway would read it at start-up (issue 22 B7: `check` said ok, then `serve` died):
 * relative to the working directory, refused when missing in `pinned` mode or invalid in any mode that reads it.
 * Approvals in the store are not checked: `check` opens nothing.
 */
async function approvalsIssues(config: GatewayConfig): Promise<ConfigIssue[]> {
  const catalog = config.gateway.catalog;
  if (catalog.mode === 'off' || catalog.source !== 'file') return [];
  try {
    await loadGatewayCatalog(catalog, catalogSource(catalog));
    return [];
  } catch (error) {
    if (!GatewayError.is(error) || error.code !== 'MCPGATE_ERR_CATALOG_INVALID') throw error;
    const message = error.message.split('\n').map((line) => line.trim()).filter((line) => line !== '').join(' ');
    return [{ path: 'gateway.catalog.file', message }];
  }
}
