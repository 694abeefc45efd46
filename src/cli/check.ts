import { ConfigError, formatConfigIssue } from '../config/config-error.js';
import { loadConfig } from '../config/load.js';
import { assertSpawnPolicy } from '../config/spawn-policy.js';

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
 * Errors other than configuration errors are bugs and propagate.
 */
export async function runCheck(file: string, io: CheckIo): Promise<number> {
  try {
    const config = await loadConfig(file, { env: io.env });
    // A production config with an unmeasured stdio server loads, but could never spawn it (issue 4 §4).
    assertSpawnPolicy(config, file);
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
