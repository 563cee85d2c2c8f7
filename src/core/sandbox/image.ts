import { startProcess } from '../process/process-runner';
import { SandboxError } from './types';
import type { OciEngine } from './oci-driver';

export const DEFAULT_SANDBOX_IMAGE = 'forge-sandbox:latest';

export interface BuildImageOptions {
  engine: OciEngine;
  /** Folder holding the Dockerfile (the extension's `container/`). */
  contextDir: string;
  tag?: string;
  /** Each line of the engine's build output, as it comes. */
  onLog?: (line: string) => void;
  /** Environment for the engine CLI (e.g. DOCKER_HOST). */
  env?: NodeJS.ProcessEnv;
  binary?: string;
  signal?: AbortSignal;
  /** The Dockerfile (default: the context's `Dockerfile`). */
  dockerfile?: string;
  /** `--build-arg` values. */
  buildArgs?: Record<string, string>;
  /** The stage to build (`--target`). */
  target?: string;
  /** What is built, for the failure's message (default: the sandbox image <tag>). */
  what?: string;
  /** Remove the build's intermediate containers even when it fails (`--force-rm`). */
  forceRm?: boolean;
}

/** Builds `container/Dockerfile` into the sandbox image (Forge: Build Sandbox Image). */
export async function buildImage(options: BuildImageOptions): Promise<{ tag: string }> {
  const tag = options.tag ?? DEFAULT_SANDBOX_IMAGE;
  const binary = options.binary ?? options.engine;
  const args = ['build', '--tag', tag];
  if (options.dockerfile) args.push('--file', options.dockerfile);
  for (const [k, v] of Object.entries(options.buildArgs ?? {})) args.push('--build-arg', `${k}=${v}`);
  if (options.target) args.push('--target', options.target);
  if (options.forceRm) args.push('--force-rm');
  args.push(options.contextDir);
  const tail: string[] = [];
  const started = startProcess(binary, args, {
    env: options.env ?? process.env,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  const onText = (() => {
    let partial = '';
    return (chunk: Buffer) => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) {
        tail.push(line);
        if (tail.length > 20) tail.shift();
        options.onLog?.(line);
      }
    };
  })();
  started.child?.stdout?.on('data', onText);
  started.child?.stderr?.on('data', onText);
  const first = await Promise.race([started.closed.then((exit) => ({ exit })), started.spawnFailed.then((error) => ({ error }))]);
  if ('error' in first) {
    throw first.error.kind === 'program-not-found'
      ? new SandboxError(`${binary} is not installed: install ${options.engine} to build the sandbox image.`, 'unavailable')
      : first.error;
  }
  if (options.signal?.aborted) {
    throw Object.assign(new Error('The operation was aborted', { cause: options.signal.reason }), { name: 'AbortError', code: 'ABORT_ERR' });
  }
  const code = first.exit.exitCode;
  if (code !== 0) {
    throw new SandboxError(
      `Building ${options.what ?? `the sandbox image ${tag}`} with ${options.engine} failed (exit ${code}). Last output:\n${tail.join('\n')}`,
      'engine-failed',
    );
  }
  return { tag };
}
