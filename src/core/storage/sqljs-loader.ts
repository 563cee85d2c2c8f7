import fs from 'node:fs';
import { createRequire } from 'node:module';
import initSqlJs, { type SqlJsStatic } from 'sql.js';
import { ForgeDatabaseError } from './errors';

export interface SqlJsSource {
  /** An already initialised sql.js module to share between databases. */
  readonly sqlJs?: SqlJsStatic;
  /** The bytes of `sql-wasm.wasm`. */
  readonly wasmBinary?: Uint8Array;
  /**
   * Path of `sql-wasm.wasm`. The extension bundle copies it next to
   * `dist/extension.cjs` and passes that path; without it, Forge resolves the
   * file from the `sql.js` package in node_modules (tests, CLI from source).
   */
  readonly wasmPath?: string;
}

/**
 * Where node_modules resolution starts. In the CommonJS extension bundle
 * `import.meta.url` does not exist (esbuild empties `import.meta`), but
 * `__filename` does; under tsx/ESM it is the other way round.
 */
function resolutionBase(): string {
  if (typeof __filename === 'string') return __filename;
  return import.meta.url;
}

export function defaultSqlWasmPath(): string {
  return createRequire(resolutionBase()).resolve('sql.js/dist/sql-wasm.wasm');
}

export async function loadSqlJs(source: SqlJsSource): Promise<SqlJsStatic> {
  if (source.sqlJs) return source.sqlJs;
  let wasmBinary = source.wasmBinary;
  if (!wasmBinary) {
    let wasmPath = source.wasmPath;
    try {
      wasmPath ??= defaultSqlWasmPath();
      wasmBinary = fs.readFileSync(wasmPath);
    } catch (error) {
      throw new ForgeDatabaseError(
        'unreadable',
        wasmPath ?? 'sql.js/dist/sql-wasm.wasm',
        `Forge cannot load SQLite's WebAssembly file ${wasmPath ?? 'sql.js/dist/sql-wasm.wasm'}: ` +
          `${error instanceof Error ? error.message : String(error)}. Reinstall Forge (the file ships with it).`,
        { cause: error },
      );
    }
  }
  const binary = wasmBinary;
  // Copy into a plain ArrayBuffer: emscripten's types want ArrayBuffer, and a
  // Buffer may be a view into Node's shared pool.
  const arrayBuffer = binary.buffer.slice(binary.byteOffset, binary.byteOffset + binary.byteLength) as ArrayBuffer;
  return initSqlJs({ wasmBinary: arrayBuffer });
}
