/**
 * Errors a user can meet when Forge opens or writes its database. Every
 * message names the file involved and says what to do about it; `code` lets
 * callers (the extension, the CLI's `--json` output) react without parsing
 * the message.
 */
export type ForgeDatabaseErrorCode =
  /** The snapshot or journal content is damaged; the file was moved aside. */
  | 'corrupt'
  /** A file exists but cannot be read (permissions, I/O error). Nothing was moved. */
  | 'unreadable'
  /** The data directory or a database file cannot be written. */
  | 'readonly'
  /** The database path (or a file name derived from it) exceeds the platform's limits. */
  | 'path_too_long'
  /** A live process held the cross-process lock without a break for far longer than any write takes (stuck). */
  | 'lock_stuck'
  /** The database was written by a newer Forge whose schema this version does not know. */
  | 'newer_schema'
  /** A schema migration failed; the database stays at the previous version. */
  | 'migration_failed'
  /** A journal record could not be applied (schema disagreement between Forge versions). */
  | 'replay_failed'
  /** The disk is full. */
  | 'disk_full'
  /** The database was used after close(). */
  | 'closed'
  /** Misuse of the API (an async transaction body, an unbindable parameter, …). */
  | 'invalid_use';

export class ForgeDatabaseError extends Error {
  override readonly name = 'ForgeDatabaseError';
  readonly code: ForgeDatabaseErrorCode;
  /** The file or directory the error is about. */
  readonly filePath: string;
  /** Where a damaged file was moved to, when it was moved aside. */
  readonly movedTo: readonly string[];

  constructor(
    code: ForgeDatabaseErrorCode,
    filePath: string,
    message: string,
    options: { cause?: unknown; movedTo?: readonly string[] } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.filePath = filePath;
    this.movedTo = options.movedTo ?? [];
  }
}

/** The database holds schema changes this Forge does not know (`unknownIds`). */
export function newerSchemaError(databasePath: string, unknownIds: readonly number[]): ForgeDatabaseError {
  return new ForgeDatabaseError(
    'newer_schema',
    databasePath,
    `The database ${databasePath} was updated by a newer version of Forge (schema changes ${unknownIds.join(', ')} ` +
      `are unknown to this version). Update Forge in every VS Code window and the CLI to the latest version.`,
  );
}

export function isForgeDatabaseError(
  error: unknown,
  code?: ForgeDatabaseErrorCode,
): error is ForgeDatabaseError {
  return error instanceof ForgeDatabaseError && (code === undefined || error.code === code);
}

/** The `code` of a Node.js system error (`ENOENT`, `EACCES`, …), if any. */
export function systemErrorCode(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error) {
    const code = (error as { code: unknown }).code;
    return typeof code === 'string' ? code : undefined;
  }
  return undefined;
}

/**
 * Translates a file-system failure into a ForgeDatabaseError with a message
 * that says what to do, or returns undefined when the failure is not one a
 * user can fix (the caller then rethrows the original error).
 */
export function describeFileSystemError(
  error: unknown,
  filePath: string,
  doing: string,
): ForgeDatabaseError | undefined {
  const code = systemErrorCode(error);
  switch (code) {
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return new ForgeDatabaseError(
        'readonly',
        filePath,
        `Forge cannot ${doing} ${filePath}: ${code === 'EROFS' ? 'the file system is read-only' : 'permission denied'}. ` +
          `Make the folder and its files writable by your user (for example \`chmod u+rwX\` on the folder), ` +
          `or point Forge's data folder (setting forge.dataDir / option --data-dir) at a writable location.`,
        { cause: error },
      );
    case 'ENAMETOOLONG':
      return new ForgeDatabaseError(
        'path_too_long',
        filePath,
        `Forge cannot ${doing} ${filePath}: the path is too long for this system. ` +
          `Choose a shorter data folder (setting forge.dataDir / option --data-dir).`,
        { cause: error },
      );
    case 'ENOSPC':
    case 'EDQUOT':
      return new ForgeDatabaseError(
        'disk_full',
        filePath,
        `Forge cannot ${doing} ${filePath}: the disk is full. Free some space and try again; ` +
          `the database is unchanged by the failed write.`,
        { cause: error },
      );
    case 'EIO':
    case 'EISDIR':
    case 'ENOTDIR':
      return new ForgeDatabaseError(
        'unreadable',
        filePath,
        `Forge cannot ${doing} ${filePath} (${code}). Check that the path is a regular file on a healthy disk, ` +
          `or point Forge's data folder (setting forge.dataDir / option --data-dir) elsewhere.`,
        { cause: error },
      );
    default:
      return undefined;
  }
}
