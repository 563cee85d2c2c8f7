import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';

export interface RunOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Written to stdin, which is then closed. Without it stdin stays open until the child exits (see keepStdinOpen). */
  input?: string;
  /**
   * Keep the child's stdin open (an idle pipe) for its whole life. The OCI exec wrapper
   * reads it to notice that Forge gave up on the command: when this process dies or
   * kills the client, the pipe closes and the command is killed inside the sandbox.
   */
  keepStdinOpen?: boolean;
  timeoutMs?: number;
  /** Cap on captured output per stream, in bytes. */
  maxOutputBytes?: number;
}

export interface RunResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/**
 * The one child-process runner of the sandbox module. The child leads its own process
 * group so a time-out can kill everything it started on the host side.
 */
export function runCommand(program: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const max = options.maxOutputBytes ?? 16 * 1024 * 1024;
  return new Promise((resolve, reject) => {
    const child = spawn(program, args, {
      env: options.env ?? process.env,
      cwd: options.cwd,
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let errBytes = 0;
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    child.stdout.on('data', (b: Buffer) => {
      if (outBytes < max) out.push(b);
      outBytes += b.length;
    });
    child.stderr.on('data', (b: Buffer) => {
      if (errBytes < max) err.push(b);
      errBytes += b.length;
    });
    child.stdin.on('error', () => {
      // The child may exit before reading its input; that is its business.
    });
    child.on('error', (e) => {
      if (timer) clearTimeout(timer);
      reject(e);
    });
    if (options.timeoutMs !== undefined) {
      timer = setTimeout(() => {
        timedOut = true;
        killGroup(child.pid, 'SIGKILL');
      }, options.timeoutMs);
    }
    child.on('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      resolve({
        exitCode: code,
        signal,
        stdout: Buffer.concat(out).toString('utf8'),
        stderr: Buffer.concat(err).toString('utf8'),
        timedOut,
      });
    });
    if (options.input !== undefined) child.stdin.end(options.input);
    else if (!options.keepStdinOpen) child.stdin.end();
  });
}

export function killGroup(pid: number | undefined, signal: NodeJS.Signals): void {
  if (!pid) return;
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      // Already gone.
    }
  }
}

/** Quotes one word for a POSIX shell. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** The absolute path of `binary` on `pathVar`, or `binary` itself when not found (or already a path). */
export function resolveOnPath(binary: string, pathVar: string | undefined): string {
  if (binary.includes('/')) return binary;
  for (const dir of (pathVar ?? '').split(':')) {
    if (!dir) continue;
    const candidate = `${dir}/${binary}`;
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return binary;
}
