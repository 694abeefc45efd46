/**
 * The Base64 sentinel of MCP 2026-07-28 header values (basic/transports/streamable-http §value encoding), shared by
 * the downstream transport, which checks the headers clients send, and the upstream client, which sends them.
 */

export const SENTINEL_PREFIX = '=?base64?';
export const SENTINEL_SUFFIX = '?=';

/**
 * Encodes a value for a header the gateway sends: plain when every character is visible ASCII or space, with no
 * leading or trailing space, and it does not look like the sentinel; else `=?base64?{UTF-8 as Base64}?=`. A tab
 * anywhere is encoded too: RFC 9110 allows it inside a value, but the conformance client check
 * (`http-custom-headers`) wants Base64 for any control character, and Base64 is always accepted. A lone
 * surrogate does not survive UTF-8 (it becomes U+FFFD).
 */
export function encodeHeaderValue(value: string): string {
  // The spec's pattern literally (starts with the prefix, ends with the suffix, even overlapping): `=?base64?=`
  // is encoded too, though the decoder would take it as a literal.
  let plain = !(value.startsWith(SENTINEL_PREFIX) && value.endsWith(SENTINEL_SUFFIX)) && (value.length === 0 || (value.charCodeAt(0) !== 0x20 && value.charCodeAt(value.length - 1) !== 0x20));
  for (let index = 0; plain && index < value.length; index++) {
    const code = value.charCodeAt(index);
    if (code < 0x20 || code > 0x7e) plain = false;
  }
  return plain ? value : `${SENTINEL_PREFIX}${Buffer.from(value, 'utf8').toString('base64')}${SENTINEL_SUFFIX}`;
}
