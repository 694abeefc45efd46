/** The text of anything thrown: an Error's message, anything else as a string. For logs, reasons and statuses. */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
