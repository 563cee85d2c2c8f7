export {
  openForgeDatabase,
  type DatabaseDiagnostics,
  type ForgeDatabase,
  type OpenForgeDatabaseOptions,
} from './database';
export { ForgeDatabaseError, isForgeDatabaseError, type ForgeDatabaseErrorCode } from './errors';
export { FORGE_MIGRATIONS, LATEST_SCHEMA_VERSION, type Migration } from './migrations';
export type { RunResult, SqlExecutor, SqlParam, SqlRow, SqlValue } from './sql-executor';
export { defaultSqlWasmPath } from './sqljs-loader';
export * from './repositories';
