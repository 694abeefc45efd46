// The part of the global WebAssembly namespace the project uses (redact/anchor-filter.ts, jsonrpc/json-bytes.ts),
// which @types/node 20 does not declare.
declare namespace WebAssembly {
  class Module {
    constructor(bytes: Uint8Array);
  }
  class Instance {
    constructor(module: Module);
    readonly exports: object;
  }
}
