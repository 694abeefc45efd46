import { z } from 'zod';

/** Shortest admin token accepted: 256 bits, so it cannot be guessed online whatever the rate limit. */
export const MIN_ADMIN_TOKEN_BYTES = 32;

/**
 * `gateway.admin` (issue 5 §9): the credential of the admin REST API under `/admin/v1`. Usually
 * `token: ${MCPGATE_ADMIN_TOKEN:-}`: an unset or empty token disables the admin API (it answers 404).
 */
export const adminSchema = z.strictObject({
  token: z
    .string()
    .optional()
    // An empty value is what `${VAR:-}` gives when the variable is unset: it means "disabled", not "no password".
    .transform((value) => (value === '' ? undefined : value))
    .refine((value) => value === undefined || Buffer.byteLength(value, 'utf8') >= MIN_ADMIN_TOKEN_BYTES, {
      message: `admin.token must be at least ${MIN_ADMIN_TOKEN_BYTES} bytes (e.g. openssl rand -hex 32)`,
    })
    // An ordinary key as admin token would make every key holder who learns it an administrator by accident,
    // and the admin API refuses `mcpg_` credentials with 403 anyway.
    .refine((value) => value === undefined || !value.startsWith('mcpg_'), {
      message: 'admin.token must not be a gateway API key (mcpg_…); generate a separate secret',
    }),
});

export type AdminConfig = z.infer<typeof adminSchema>;
