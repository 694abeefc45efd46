import { ConfigError, type ConfigIssue } from './config-error.js';
import { allowsUnmeasured } from './isolation-schema.js';
import type { GatewayConfig } from './schema.js';

/**
 * The stdio servers this configuration would refuse to spawn because they have no `digest` and may not run
 * unmeasured (issue 4 §4: `allowUnmeasured` defaults to false in production mode). Reported before anything
 * starts so that `mcpgate check` and `mcpgate serve` name them, rather than the first call failing at run time
 * (the spawn itself refuses too, so this is early feedback, not the enforcement).
 *
 * Kept out of the schema on purpose: a schema-valid file stays loadable by tools that only read it.
 */
export function unmeasuredStdioIssues(config: GatewayConfig): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  for (const [name, server] of Object.entries(config.servers)) {
    if (server.transport !== 'stdio' || !server.enabled || server.digest !== undefined) continue;
    if (allowsUnmeasured(server, config.gateway.mode)) continue;
    issues.push({
      path: `servers.${name}`,
      message: `stdio server "${name}" has no digest and gateway.mode is ${config.gateway.mode}, so it would never be spawned; set digest: "sha256:<hex>" with the hex that \`sha256sum "$(command -v ${server.command})"\` prints (for an interpreted server, measure: <script> and the script's sha256sum instead), or allowUnmeasured: true to run it unmeasured, or gateway.mode: dev`,
    });
  }
  return issues;
}

/**
 * @throws ConfigError MCPGATE_ERR_CONFIG_INVALID listing {@link unmeasuredStdioIssues}, when there are any.
 */
export function assertSpawnPolicy(config: GatewayConfig, fileName?: string): void {
  const issues = unmeasuredStdioIssues(config);
  if (issues.length > 0) throw new ConfigError('MCPGATE_ERR_CONFIG_INVALID', issues, fileName);
}
