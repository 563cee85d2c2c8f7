import { runProcess } from '../process/process-runner';

export { resolveOnPath } from '../process/process-runner';

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
  /** The output as it comes (see RunProcessOptions.onOutput). */
  onOutput?: (text: string) => void;
}

export interface RunResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/**
 * How the sandbox module runs a host program (the engine CLI, bwrap, …), through the project's
 * one process runner: the child leads its own process group so a time-out kills everything it
 * started on the host side (SIGKILL at once).
 */
export async function runCommand(program: string, args: readonly string[], options: RunOptions = {}): Promise<RunResult> {
  const r = await runProcess(program, args, {
    env: options.env ?? process.env,
    ...(options.cwd !== undefined ? { cwd: options.cwd } : {}),
    ...(options.input !== undefined ? { input: options.input } : {}),
    stdin: options.keepStdinOpen ? 'keep-open' : 'pipe',
    processGroup: true,
    ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    ...(options.maxOutputBytes !== undefined ? { maxOutputBytes: options.maxOutputBytes } : {}),
    ...(options.onOutput ? { onOutput: options.onOutput } : {}),
  });
  return { exitCode: r.exitCode, signal: r.signal, stdout: r.stdout, stderr: r.stderr, timedOut: r.timedOut };
}

/** Quotes one word for a POSIX shell. */
export function shellQuote(word: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}
