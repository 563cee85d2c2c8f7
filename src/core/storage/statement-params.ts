import { ForgeDatabaseError } from './errors';
import type { JournalValue } from './journal-format';
import type { SqlParam } from './sql-executor';

/** Checks and copies statement parameters into values the journal can hold. */
export function normaliseParams(sql: string, params: readonly SqlParam[] | undefined): JournalValue[] {
  if (params === undefined) return [];
  if (!Array.isArray(params)) {
    throw new ForgeDatabaseError('invalid_use', sql, `Statement parameters must be an array (statement: ${sql})`);
  }
  return params.map((value, index): JournalValue => {
    if (value === null || typeof value === 'string') return value;
    if (typeof value === 'number') {
      if (Number.isFinite(value)) return value;
    } else if (typeof value === 'boolean') {
      return value ? 1 : 0;
    } else if (value instanceof Uint8Array) {
      return new Uint8Array(value); // own copy: the caller may reuse its buffer after we journaled it
    }
    throw new ForgeDatabaseError(
      'invalid_use',
      sql,
      `Parameter ${index + 1} (${String(value)}) cannot be stored: use a string, finite number, boolean, ` +
        `null or Uint8Array (statement: ${sql})`,
    );
  });
}

export function isThenable(value: unknown): boolean {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}
