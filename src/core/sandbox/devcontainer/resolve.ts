/**
 * A docker/podman loop's sandbox image from the repository's Dev Container configuration,
 * read at the loop's base commit from the repository's git objects (never from the worktree,
 * which is the agent's): `image` is used as it is; `build.dockerfile` is built from a
 * `git archive` of the base commit's context folder, tagged by content
 * (`forge-devcontainer:<hash>`) and built once: a tag the engine already has is reused.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { runProcess } from '../../process/process-runner';
import { HARDENING_CONFIG } from '../../workspace/git-hardening';
import { buildImage } from '../image';
import type { OciEngine } from '../oci-driver';
import { SandboxError } from '../types';
import { decideDevcontainer, devcontainerImageTag, DEVCONTAINER_CONFIG_PATHS, type DevcontainerDecision } from './config';

export interface DevcontainerSource {
  /** The repository's git directory (its common dir): objects are read from it alone. */
  gitDir: string;
  /** The loop's base commit. */
  commit: string;
}

/** The configuration file at the commit and what Forge makes of it; null when there is none. */
export async function readDevcontainerAt(source: DevcontainerSource): Promise<(DevcontainerDecision & { text: string }) | null> {
  for (const path of DEVCONTAINER_CONFIG_PATHS) {
    const entry = await treeEntry(source, path);
    if (!entry) continue;
    if (entry.type !== 'blob' || entry.mode === '120000') {
      return { kind: 'refused', configPath: path, message: `${path}: it must be a regular file (it is a ${entry.mode === '120000' ? 'symbolic link' : entry.type}).`, text: '' };
    }
    const text = await git(source, ['cat-file', 'blob', entry.object]);
    return { ...decideDevcontainer(path, text), text };
  }
  return null;
}

export interface DevcontainerImageOptions extends DevcontainerSource {
  engine: OciEngine;
  /** Environment for the engine CLI (DOCKER_HOST, …). */
  env?: NodeJS.ProcessEnv;
  /** A scratch folder of Forge's (the build context is extracted under it, then removed). */
  scratchDir: string;
  /** The build's output, line by line, and what Forge does. */
  onLog?: (line: string) => void;
  signal?: AbortSignal;
  /** A build running longer is stopped and fails the start; default 30 minutes. */
  buildTimeoutMs?: number;
}

export const DEFAULT_DEVCONTAINER_BUILD_TIMEOUT_MS = 30 * 60_000;

export type DevcontainerImage =
  /** No configuration at the commit: the setting's image applies. */
  | { kind: 'none' }
  | { kind: 'image'; configPath: string; image: string }
  | { kind: 'built'; configPath: string; image: string; cached: boolean };

/** Builds of one tag in flight in this process: two loops starting together build it once. */
const inFlight = new Map<string, Promise<void>>();

/**
 * The image a docker/podman loop's sandbox uses, per the repository's Dev Container
 * configuration at the base commit. Throws a SandboxError (a start error) for a configuration
 * Forge refuses and for a failed build (with the output's tail).
 */
export async function resolveDevcontainerImage(options: DevcontainerImageOptions): Promise<DevcontainerImage> {
  const found = await readDevcontainerAt(options);
  if (!found) return { kind: 'none' };
  if (found.kind === 'refused') throw new SandboxError(`The Dev Container configuration cannot be used: ${found.message}`, 'invalid-spec');
  if (found.kind === 'image') return { kind: 'image', configPath: found.configPath, image: found.image };
  const { build } = found;
  const dockerfile = await treeEntry(options, build.dockerfile);
  if (!dockerfile || dockerfile.type !== 'blob' || dockerfile.mode === '120000') {
    throw new SandboxError(`The Dev Container configuration cannot be used: ${found.configPath}: \`build.dockerfile\` names ${build.dockerfile}, which is not a regular file at the base commit ${options.commit.slice(0, 12)}.`, 'invalid-spec');
  }
  const contextTree = (await git(options, ['rev-parse', '--verify', `${options.commit}^{commit}:${build.context === '.' ? '' : build.context}`]).catch(() => '')).trim();
  if (!contextTree) throw new SandboxError(`The Dev Container configuration cannot be used: ${found.configPath}: \`build.context\` (${build.context}) is not a folder at the base commit.`, 'invalid-spec');
  const tag = devcontainerImageTag({ configText: found.text, dockerfileObject: dockerfile.object, contextTree });
  if (await imageExists(options, tag)) return { kind: 'built', configPath: found.configPath, image: tag, cached: true };
  let running = inFlight.get(tag);
  if (!running) {
    running = buildFromCommit(options, build, tag).finally(() => inFlight.delete(tag));
    inFlight.set(tag, running);
  }
  await running;
  return { kind: 'built', configPath: found.configPath, image: tag, cached: false };
}

async function buildFromCommit(options: DevcontainerImageOptions, build: Extract<DevcontainerDecision, { kind: 'build' }>['build'], tag: string): Promise<void> {
  const dir = join(options.scratchDir, `devcontainer-${randomBytes(6).toString('hex')}`);
  const contextDir = join(dir, 'context');
  await mkdir(contextDir, { recursive: true, mode: 0o700 });
  try {
    const archive = join(dir, 'context.tar');
    const treeish = build.context === '.' ? `${options.commit}^{tree}` : `${options.commit}:${build.context}`;
    await git(options, ['archive', '--format=tar', `--output=${archive}`, treeish]);
    const untar = await runProcess('tar', ['-x', '--no-same-owner', '--no-same-permissions', '-f', archive, '-C', contextDir], { timeoutMs: 5 * 60_000 });
    if (untar.exitCode !== 0) throw new SandboxError(`Extracting the Dev Container build context failed: ${untar.stderr.trim()}`, 'engine-failed');
    await rm(archive, { force: true });
    options.onLog?.(`[devcontainer] building ${tag} with ${options.engine} from ${build.dockerfile} (context ${build.context}) of commit ${options.commit.slice(0, 12)}`);
    // podman builds RUN steps in runc containers of their own, which outlive a stopped
    // `podman build`: their bundles go under this folder, so a stopped build's are found and ended.
    const bundles = join(dir, 'tmp');
    await mkdir(bundles, { mode: 0o700 });
    const env = { ...(options.env ?? process.env), ...(options.engine === 'podman' ? { TMPDIR: bundles } : {}) };
    const timeoutMs = options.buildTimeoutMs ?? DEFAULT_DEVCONTAINER_BUILD_TIMEOUT_MS;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const tail: string[] = [];
    const onLog = (line: string) => {
      tail.push(line);
      if (tail.length > 20) tail.shift();
      options.onLog?.(line);
    };
    await buildImage({
      engine: options.engine,
      contextDir,
      tag,
      dockerfile: join(contextDir, build.dockerfileInContext),
      buildArgs: build.args,
      ...(build.target ? { target: build.target } : {}),
      what: `the Dev Container image ${tag} (${build.dockerfile})`,
      env,
      onLog,
      signal,
      forceRm: true,
    }).catch(async (error: unknown) => {
      if (signal.aborted && options.engine === 'podman') await endBuildContainers(bundles);
      if (timeout.aborted && !options.signal?.aborted) {
        throw new SandboxError(
          `Building the Dev Container image ${tag} (${build.dockerfile}) did not end within ${Math.round(timeoutMs / 1000)} s: Forge stopped it. Last output:\n${tail.join('\n')}`,
          'engine-failed',
        );
      }
      throw error;
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Ends the runc containers whose bundle lies under `bundles` (a stopped podman build's RUN steps). Best effort. */
async function endBuildContainers(bundles: string): Promise<void> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const listed = await runProcess('runc', ['list', '--format', 'json'], { timeoutMs: 30_000 }).catch(() => null);
    let entries: Array<{ id?: string; bundle?: string }> = [];
    try {
      entries = listed && listed.exitCode === 0 ? ((JSON.parse(listed.stdout || 'null') as typeof entries | null) ?? []) : [];
    } catch {
      entries = [];
    }
    const ours = entries.filter((e) => e.id && e.bundle && (e.bundle === bundles || e.bundle.startsWith(`${bundles}/`)));
    if (ours.length === 0 && attempt > 0) return;
    for (const e of ours) {
      await runProcess('runc', ['kill', e.id!, 'KILL'], { timeoutMs: 30_000 }).catch(() => null);
      await runProcess('runc', ['delete', '--force', e.id!], { timeoutMs: 30_000 }).catch(() => null);
    }
    await new Promise((r) => setTimeout(r, 300));
  }
}

async function imageExists(options: DevcontainerImageOptions, tag: string): Promise<boolean> {
  const r = await runProcess(options.engine, ['image', 'inspect', '--format', '{{.Id}}', tag], { env: options.env ?? process.env, timeoutMs: 60_000 }).catch(() => null);
  return r !== null && r.exitCode === 0 && r.stdout.trim() !== '';
}

async function treeEntry(source: DevcontainerSource, path: string): Promise<{ mode: string; type: string; object: string } | null> {
  const out = await git(source, ['ls-tree', '-z', `${source.commit}^{commit}`, '--', path]);
  const line = out.split('\0').find((l) => l.endsWith(`\t${path}`));
  if (!line) return null;
  const [meta] = line.split('\t');
  const [mode, type, object] = meta!.split(' ');
  return mode && type && object ? { mode, type, object } : null;
}

/** git on the repository's objects alone: no work tree, nothing the repository's files ask for runs. */
async function git(source: DevcontainerSource, args: string[]): Promise<string> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const k of Object.keys(env)) if (k.startsWith('GIT_')) delete env[k];
  const r = await runProcess('git', [`--git-dir=${source.gitDir}`, ...HARDENING_CONFIG.flatMap((c) => ['-c', c]), ...args], { env, timeoutMs: 5 * 60_000 });
  if (r.exitCode !== 0) throw new SandboxError(`git ${args[0]} failed while reading the Dev Container configuration: ${r.stderr.trim()}`, 'engine-failed');
  return r.stdout;
}
