import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Shared helpers of the storage tests: temp data folders, warning capture and
 * child processes running test/support/storage-*.ts under tsx.
 */

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface TempDataDir {
  readonly dir: string;
  readonly dbPath: string;
  cleanup(): void;
}

export function makeTempDataDir(prefix = 'forge-storage-'): TempDataDir {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  return {
    dir,
    dbPath: path.join(dir, 'forge.db'),
    cleanup: () => {
      // Undo permission changes made by read-only tests before removing.
      try {
        fs.chmodSync(dir, 0o755);
      } catch {
        // already gone
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface WarningSink {
  readonly messages: string[];
  readonly onWarning: (message: string) => void;
}

export function collectWarnings(): WarningSink {
  const messages: string[] = [];
  return { messages, onWarning: (message) => messages.push(message) };
}

export interface StorageChild {
  readonly process: ChildProcess;
  /** Lines the child printed so far. */
  readonly lines: string[];
  /** Resolves when a line matching `predicate` has been printed. */
  waitForLine(predicate: (line: string) => boolean): Promise<string>;
  /** Resolves with the exit code / signal once the child has exited (and been reaped). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  readonly stderr: () => string;
}

/** Spawns `node --import tsx test/support/<script>` with `args`; stdout is collected line by line. */
export function spawnStorageChild(script: string, args: readonly string[], options: { uid?: number; gid?: number } = {}): StorageChild {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(REPO_ROOT, 'test', 'support', script), ...args], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(options.uid !== undefined ? { uid: options.uid, gid: options.gid ?? options.uid } : {}),
  });
  const lines: string[] = [];
  const waiters: { predicate: (line: string) => boolean; resolve: (line: string) => void }[] = [];
  let buffered = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    buffered += chunk;
    let newline = buffered.indexOf('\n');
    while (newline !== -1) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      lines.push(line);
      for (const waiter of [...waiters]) {
        if (waiter.predicate(line)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(line);
        }
      }
      newline = buffered.indexOf('\n');
    }
  });
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    // 'close', not 'exit': only then has everything the child wrote to stdout been read.
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  return {
    process: child,
    lines,
    stderr: () => stderr,
    exited,
    waitForLine: (predicate) => {
      const seen = lines.find(predicate);
      if (seen !== undefined) return Promise.resolve(seen);
      return new Promise<string>((resolve, reject) => {
        waiters.push({ predicate, resolve });
        void exited.then(({ code, signal }) =>
          reject(new Error(`child exited (code ${code}, signal ${signal}) before printing the expected line; stderr:\n${stderr}`)),
        );
      });
    },
  };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
