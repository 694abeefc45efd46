/** Which downstream transport a client came in on: Streamable HTTP, 2024-11-05 HTTP+SSE, or stdio. */
export type TransportKind = 'streamable-http' | 'legacy-sse' | 'stdio';
