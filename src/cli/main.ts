#!/usr/bin/env node
import { Command, Option } from 'commander';
import { loadConfig } from '../config/load.js';
import { assertSpawnPolicy } from '../config/spawn-policy.js';
import { runStdioGateway, startHttpGateway } from '../main.js';
import { createLogger, LOG_FORMATS, resolveLogFormat, type LogFormat, type Logger } from '../observability/logger.js';
import { VERSION } from '../version.js';
import { registerAuditCommand, stdoutDrained } from './audit.js';
import { registerCatalogCommand } from './catalog.js';
import { runCheck } from './check.js';
import { registerDirectoryCommands } from './directory.js';
import { registerExplainCommand } from './explain.js';
import { applyHeapGrowth } from './heap-growth.js';
import { registerKeysCommand } from './keys.js';
import { registerPermissionsCommand } from './permissions.js';
import { registerReceiptCommand } from './receipt.js';
import { registerSecretsCommand } from './secrets.js';
import { registerToolsetsCommand } from './toolsets.js';
import { runPin } from './pin.js';
import { runCommand } from './control-cli.js';
import { reportError } from './report-error.js';

const DEFAULT_CONFIG = 'mcpgate.yaml';

async function load(file: string) {
  const config = await loadConfig(file, { env: process.env });
  assertSpawnPolicy(config, file);
  return config;
}

/** `--log-format`, else pretty when a person watches stderr (issue 22 C12). */
const logFormatOption = (): Option =>
  new Option('--log-format <format>', 'log lines as JSON or as readable text (default: pretty on a terminal, json otherwise)').choices(LOG_FORMATS);

function gatewayLogger(config: Awaited<ReturnType<typeof load>>, format: LogFormat | undefined): Logger {
  return createLogger({ level: config.gateway.logLevel, name: config.gateway.name, format: resolveLogFormat(format, process.stderr.isTTY === true) });
}

async function serve(options: { config: string; port?: string; host?: string; logFormat?: LogFormat }): Promise<void> {
  const config = await load(options.config);
  const heapGrowth = applyHeapGrowth(config.gateway.limits.heapGrowthPercent);
  const listen = {
    host: options.host ?? config.gateway.listen.host,
    port: options.port === undefined ? config.gateway.listen.port : Number(options.port),
  };
  const effective = { ...config, gateway: { ...config.gateway, listen } };
  const logger = gatewayLogger(config, options.logFormat);
  const gateway = await startHttpGateway(effective, logger);
  const heapGrowthPercent = heapGrowth ? config.gateway.limits.heapGrowthPercent : 'node';
  logger.info({ url: gateway.url, servers: Object.keys(config.servers), mode: config.gateway.mode, heapGrowthPercent }, 'listening');
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    // The delay and the calls' grace are the configuration's; what follows (sessions, receipts, children's TERM →
    // KILL) gets 10 s more.
    const { shutdownDelayMs, shutdownGraceMs } = config.gateway.limits;
    const force = setTimeout(() => process.exit(1), shutdownDelayMs + shutdownGraceMs + 10_000);
    force.unref();
    gateway.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

async function stdio(options: { config: string; logFormat?: LogFormat }): Promise<void> {
  const config = await load(options.config);
  applyHeapGrowth(config.gateway.limits.heapGrowthPercent);
  const logger = gatewayLogger(config, options.logFormat);
  await runStdioGateway(config, logger);
  process.exit(0);
}

const program = new Command()
  .name('mcpgate')
  .description('An MCP gateway: one endpoint in front of many MCP servers.')
  .version(VERSION)
  .option('--debug', 'after an error\'s one line, print its stack');

/** Read when a command fails, after commander has parsed the line (a global option may follow the subcommand). */
const debug = (): boolean => program.opts<{ debug?: boolean }>().debug === true;

const controlIo = {
  env: process.env,
  stdout: (line: string) => process.stdout.write(`${line}\n`),
  stderr: (line: string) => process.stderr.write(`${line}\n`),
  get debug() {
    return debug();
  },
};

program
  .command('serve', { isDefault: true })
  .description('serve the gateway over HTTP (Streamable HTTP at /mcp, legacy SSE at /sse)')
  .option('-c, --config <file>', 'configuration file (YAML, or mcpServers JSON)', DEFAULT_CONFIG)
  .option('-p, --port <port>', 'override gateway.listen.port')
  .option('-H, --host <host>', 'override gateway.listen.host')
  .addOption(logFormatOption())
  .action(async (options: { config: string; port?: string; host?: string; logFormat?: LogFormat }) => {
    const code = await runCommand(controlIo, 'serve', () => serve(options));
    // A gateway that could not start may hold handles (a store, a child) that would keep the process alive.
    if (code !== 0) process.exit(code);
  });

program
  .command('stdio')
  .description('serve one client over stdin/stdout, for desktop clients that spawn their servers')
  .option('-c, --config <file>', 'configuration file (YAML, or mcpServers JSON)', DEFAULT_CONFIG)
  .addOption(logFormatOption())
  .action(async (options: { config: string; logFormat?: LogFormat }) => {
    process.exit(await runCommand(controlIo, 'stdio', () => stdio(options)));
  });

program
  .command('check')
  .description('validate a configuration file and print each error with its path')
  .argument('<file>', 'configuration file')
  .action(async (file: string) => {
    process.exitCode = await runCommand(controlIo, 'check', () => runCheck(file, controlIo));
  });

program
  .command('pin')
  .description('connect to an https:// upstream and print both pin forms of its certificate (tls.pin, tls.spkiPin)')
  .argument('<https-url>', 'the upstream URL')
  .option('--ca <file>', 'PEM CA bundle to verify against (as tls.ca), instead of the system roots')
  .action(async (url: string, options: { ca?: string }) => {
    process.exitCode = await runCommand(controlIo, 'pin', () => runPin(url, { ca: options.ca }, controlIo));
  });

registerKeysCommand(program, controlIo, DEFAULT_CONFIG);
registerDirectoryCommands(program, controlIo, DEFAULT_CONFIG);
registerPermissionsCommand(program, controlIo, DEFAULT_CONFIG);
registerToolsetsCommand(program, controlIo, DEFAULT_CONFIG);
registerExplainCommand(program, controlIo, DEFAULT_CONFIG);
registerAuditCommand(program, { ...controlIo, drain: stdoutDrained }, DEFAULT_CONFIG);
registerCatalogCommand(program, controlIo, DEFAULT_CONFIG);
registerReceiptCommand(program, controlIo);
// Only `secrets set` reads stdin: the secret never travels in argv.
registerSecretsCommand(program, { ...controlIo, stdin: process.stdin }, DEFAULT_CONFIG);

try {
  await program.parseAsync(process.argv);
} catch (error) {
  // Every command reports its own failures; this is for one that escaped them all.
  const report = reportError(program.args[0] ?? 'serve', error, debug());
  for (const line of report.lines) process.stderr.write(`${line}\n`);
  process.exit(report.exitCode);
}
