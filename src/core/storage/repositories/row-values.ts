import type { SqlValue } from '../sql-executor';

/**
 * Column decoding shared by the repositories. SQLite hands back loosely typed
 * values; these turn them into the typed, camelCase rows callers see.
 */

export function text(value: SqlValue | undefined): string {
  return value === null || value === undefined ? '' : String(value);
}

export function optionalText(value: SqlValue | undefined): string | null {
  return value === null || value === undefined ? null : String(value);
}

export function integer(value: SqlValue | undefined): number {
  return typeof value === 'number' ? value : Number(value ?? 0);
}

export function optionalInteger(value: SqlValue | undefined): number | null {
  return value === null || value === undefined ? null : Number(value);
}

export function flag(value: SqlValue | undefined): boolean {
  return value === 1 || value === '1';
}

/** Parses a JSON column; a damaged value decodes to `fallback` instead of breaking every read of the table. */
export function json<T>(value: SqlValue | undefined, fallback: T): T {
  if (typeof value !== 'string') return fallback;
  try {
    return JSON.parse(value) as T;
  } catch {
    return fallback;
  }
}

/** Injected clock, so tests and replays control every stored time. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** Thrown for calls that name a row that does not exist; the message says which. */
export class RowNotFoundError extends Error {
  override readonly name = 'RowNotFoundError';
  constructor(what: string) {
    super(`${what} does not exist`);
  }
}
