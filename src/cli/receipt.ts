import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { Command } from 'commander';
import { verifyReceiptAgainstExport, type NumberedLine } from '../receipts/audit-match.js';
import { MAX_RECEIPT_BYTES, verifyReceipt, type ReceiptBody } from '../receipts/receipt.js';
import { printJson, runCommand, UsageError, type ControlIo } from './control-cli.js';

/** Exit code of `receipt verify` for a receipt that does not verify (1 stays "the command failed"). */
export const EXIT_INVALID = 3;


export interface ReceiptVerifyOptions {
  readonly audit?: string;
  readonly publicKey?: string;
  readonly json?: boolean;
}

async function readBounded(path: string, max: number, what: string): Promise<string> {
  try {
    const info = await stat(path);
    if (!info.isFile()) throw new UsageError(`${what} ${path} is not a regular file`);
    if (info.size > max) throw new UsageError(`${what} ${path} is larger than ${max} bytes`);
    return await readFile(path, 'utf8');
  } catch (error) {
    if (error instanceof UsageError) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown error';
    throw new UsageError(`cannot read ${what} ${path} (${code})`);
  }
}

/**
 * The export lines that can concern this receipt: those naming its session or its chain. Streamed, so an
 * export of a busy gateway's whole month does not have to fit in memory; the substring test is a superset,
 * and the lines' own numbers are kept for the reasons printed.
 */
async function relevantExportLines(path: string, receipt: ReceiptBody): Promise<NumberedLine[]> {
  const needles = [receipt.sessionId, receipt.auditChainId].filter((needle): needle is string => needle !== undefined).map((needle) => JSON.stringify(needle));
  const kept: NumberedLine[] = [];
  let line = 0;
  try {
    const info = await stat(path);
    if (!info.isFile()) throw new UsageError(`audit export ${path} is not a regular file`);
    for await (const text of createInterface({ input: createReadStream(path, 'utf8'), crlfDelay: Infinity })) {
      line += 1;
      if (needles.some((needle) => text.includes(needle))) kept.push({ line, text });
    }
  } catch (error) {
    if (error instanceof UsageError) throw error;
    const code = (error as NodeJS.ErrnoException).code ?? 'unknown error';
    throw new UsageError(`cannot read audit export ${path} (${code})`);
  }
  return kept;
}

/**
 * `mcpgate receipt verify <file> [--audit export.jsonl] [--public-key pem]`: checks a session receipt's
 * signature and, given an audit export, that the export's chain holds the receipt's records and recounts to
 * its numbers. Exit 0 valid, 3 invalid (the reason on stderr), 1 when the command itself failed.
 */
export function runReceiptVerify(file: string, options: ReceiptVerifyOptions, io: ControlIo): Promise<number> {
  return runCommand(io, 'receipt verify', async () => {
    // Read past the receipt cap so that an oversized file is reported as an invalid receipt, not a read error.
    const text = await readBounded(file, MAX_RECEIPT_BYTES * 16, 'receipt');
    const publicKey = options.publicKey === undefined ? undefined : await readBounded(options.publicKey, 64 * 1024, 'public key');
    const result = verifyReceipt(text, publicKey === undefined ? {} : { publicKey });
    if (!result.ok) {
      if (options.json === true) printJson(io, { valid: false, reason: result.reason });
      io.stderr(`mcpgate receipt verify: ${file} is INVALID: ${result.reason}`);
      return EXIT_INVALID;
    }
    const { receipt } = result.signed;
    let auditRecords: number | undefined;
    if (options.audit !== undefined) {
      const match = verifyReceiptAgainstExport(receipt, await relevantExportLines(options.audit, receipt));
      if (!match.ok) {
        if (options.json === true) printJson(io, { valid: false, signatureValid: true, reason: match.reason });
        io.stderr(`mcpgate receipt verify: ${file} does not match ${options.audit}: ${match.reason}`);
        return EXIT_INVALID;
      }
      auditRecords = match.records;
    }
    if (options.json === true) {
      printJson(io, { valid: true, keyId: result.keyId, keyPinned: result.keyPinned, receipt, ...(auditRecords === undefined ? {} : { auditRecords }) });
      return 0;
    }
    io.stdout(`receipt valid: session ${receipt.sessionId}, ${receipt.calls} calls, ${receipt.denials} denials, ended ${receipt.endedAt} (${receipt.endReason})`);
    io.stdout(
      result.keyPinned
        ? `signed by the expected key ${result.keyId}`
        : `signed by key ${result.keyId} (carried in the receipt; pass --public-key to check who signed it)`,
    );
    if (auditRecords !== undefined) io.stdout(`audit export matches: ${auditRecords} records of chain ${receipt.auditChainId ?? '-'} from first to last`);
    return 0;
  });
}

export function registerReceiptCommand(program: Command, io: ControlIo): void {
  const receipt = program.command('receipt').description('session receipts (signed at session end)');
  receipt
    .command('verify')
    .description('check a session receipt: exit 0 valid, 3 invalid (reason on stderr), 1 on a command error')
    .argument('<file>', 'the receipt, as GET /admin/v1/sessions/<id>/receipt returned it')
    .option('--audit <export.jsonl>', 'an audit export (mcpgate audit export --format jsonl) to check the receipt against')
    .option('--public-key <pem>', "the gateway's receipt public key (SPKI PEM) the receipt must be signed with")
    .option('--json', 'print the result as JSON')
    .action(async (file: string, options: ReceiptVerifyOptions) => {
      process.exitCode = await runReceiptVerify(file, options, io);
    });
}
