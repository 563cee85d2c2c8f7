import {
  assertValidSandboxName,
  assertValidSpec,
  SandboxError,
  type SandboxAvailability,
  type SandboxExecOptions,
  type SandboxExecResult,
  type SandboxLimits,
  type SandboxRuntime,
  type SandboxSettings,
  type SandboxSpec,
  type SandboxState,
} from './types';
import { runCommand, shellQuote, type RunResult } from './process';
import { SANDBOX_BASE_ENV } from './sandbox-env';

/**
 * microsandbox (`msb`, microVMs). Optional: it needs hardware virtualisation, which the
 * machines Forge is developed and tested on do not have, so this driver is covered by
 * argument-building tests only. The flags are those of `msb --help` in msb 0.7.2
 * (npm @superradcompany/microsandbox-linux-x64-gnu); the `:ro` mount option and the
 * JSON shape of `msb inspect --format json` could not be checked against a running
 * sandbox.
 */
export const MSB_LABEL = 'dev.forge.sandbox';

export function buildMsbCreateArgs(spec: SandboxSpec, uid: number, gid: number): string[] {
  assertValidSpec(spec);
  if (!spec.image) throw new SandboxError(`Sandbox "${spec.name}" needs an image for the msb driver.`, 'invalid-spec');
  const settings: SandboxSettings = { ...spec, driver: 'msb', unenforcedLimits: [] };
  const args = [
    'create', '--quiet',
    '--name', spec.name,
    '--label', `${MSB_LABEL}=1`,
    '--label', `${MSB_LABEL}.settings=${Buffer.from(JSON.stringify(settings)).toString('base64url')}`,
    '--cpus', String(Math.max(1, Math.ceil(spec.limits.cpus))),
    '--memory', `${spec.limits.memoryMb}M`,
    '--mount-dir', `${spec.worktreeDir}:${spec.worktreeDir}:uid=${uid},gid=${gid}`,
  ];
  if (spec.gitCommonDir) args.push('--mount-dir', `${spec.gitCommonDir}:${spec.gitCommonDir}:ro`);
  for (const p of spec.readOnlyPaths ?? []) args.push('--mount-dir', `${p}:${p}:ro`);
  for (const p of spec.writablePaths ?? []) args.push('--mount-dir', `${p}:${p}`);
  for (const b of spec.writableBinds ?? []) args.push('--mount-dir', `${b.source}:${b.target}`);
  for (const b of spec.readOnlyBinds ?? []) args.push('--mount-dir', `${b.source}:${b.target}:ro`);
  if (!spec.network) args.push('--no-net');
  else args.push('--net', 'all');
  args.push('--tmpfs', '/tmp', '--workdir', spec.worktreeDir, '--user', `${uid}:${gid}`);
  for (const [k, v] of Object.entries(SANDBOX_BASE_ENV)) args.push('--env', `${k}=${v}`);
  args.push(spec.image);
  return args;
}

export function buildMsbExecArgs(name: string, command: string, cwd: string, pids: number, env: Record<string, string> = {}): string[] {
  const args = ['exec', '--quiet', '--no-tty', '--workdir', cwd, '--rlimit', `nproc=${pids}`];
  for (const [k, v] of Object.entries(env)) args.push('--env', `${k}=${v}`);
  args.push(name, '--', 'bash', '-c', command);
  return args;
}

/** msb statuses (Created/Starting/Running/Draining/Paused/Stopped/Crashed) to Forge's states. */
export function mapMsbStatus(status: string): SandboxState {
  switch (status.toLowerCase()) {
    case 'running':
      return 'running';
    // msb exec resumes a stopped or crashed microVM in place: reusable, never recreated.
    case 'stopped':
    case 'crashed':
      return 'stopped';
    default:
      return 'transient';
  }
}

export interface MsbRuntimeOptions {
  binary?: string;
  env?: NodeJS.ProcessEnv;
  uid?: number;
  gid?: number;
}

export class MsbRuntime implements SandboxRuntime {
  readonly driver = 'msb' as const;
  private readonly binary: string;
  private readonly env: NodeJS.ProcessEnv;
  private readonly uid: number;
  private readonly gid: number;

  constructor(options: MsbRuntimeOptions = {}) {
    this.binary = options.binary ?? 'msb';
    this.env = options.env ?? process.env;
    this.uid = options.uid ?? process.getuid?.() ?? 0;
    this.gid = options.gid ?? process.getgid?.() ?? 0;
  }

  private cli(args: string[], timeoutMs = 120_000): Promise<RunResult> {
    return runCommand(this.binary, args, { env: this.env, timeoutMs });
  }

  async checkAvailable(): Promise<SandboxAvailability> {
    let r: RunResult;
    try {
      r = await this.cli(['--version'], 15_000);
    } catch {
      return { available: false, reason: 'msb (microsandbox) is not installed.' };
    }
    if (r.exitCode !== 0) return { available: false, reason: `msb does not run: ${r.stderr.trim()}` };
    if (process.platform === 'linux') {
      const kvm = await runCommand('sh', ['-c', 'test -w /dev/kvm && grep -qE "vmx|svm" /proc/cpuinfo'], { timeoutMs: 5000 });
      if (kvm.exitCode !== 0) {
        return { available: false, reason: 'msb needs hardware virtualisation (/dev/kvm with VT-x/AMD-V), which this machine lacks.' };
      }
    }
    return { available: true, version: r.stdout.trim() };
  }

  async create(spec: SandboxSpec): Promise<void> {
    const r = await this.cli(buildMsbCreateArgs(spec, this.uid, this.gid), 300_000);
    if (r.exitCode !== 0) throw new SandboxError(`Could not create msb sandbox "${spec.name}": ${r.stderr.trim()}`, 'engine-failed');
  }

  async start(name: string): Promise<void> {
    assertValidSandboxName(name);
    const r = await this.cli(['start', '--quiet', name]);
    if (r.exitCode !== 0) throw new SandboxError(`Could not start msb sandbox "${name}": ${r.stderr.trim()}`, 'engine-failed');
  }

  async stop(name: string): Promise<void> {
    assertValidSandboxName(name);
    await this.cli(['stop', '--quiet', name]);
  }

  async exec(name: string, command: string, options: SandboxExecOptions = {}): Promise<SandboxExecResult> {
    const state = await this.state(name);
    if (state !== 'running' && state !== 'stopped') {
      throw new SandboxError(`Sandbox "${name}" is ${state}; the command was not run (it never runs on the host).`, 'not-usable');
    }
    const settings = await this.readSettings(name);
    const args = buildMsbExecArgs(name, command, options.cwd ?? settings?.worktreeDir ?? '/', settings?.limits.pids ?? 1024, options.env);
    const r = await runCommand(this.binary, args, {
      env: this.env,
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
      ...(options.stdin !== undefined ? { input: options.stdin } : {}),
    });
    return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr, timedOut: r.timedOut, ...(r.timedOut ? { killed: 'timeout' as const } : {}) };
  }

  async remove(name: string): Promise<void> {
    assertValidSandboxName(name);
    const r = await this.cli(['remove', '--force', '--quiet', name]);
    if (r.exitCode !== 0 && !/not found/i.test(r.stderr)) {
      throw new SandboxError(`Could not remove msb sandbox "${name}": ${r.stderr.trim()}`, 'engine-failed');
    }
  }

  private async inspect(name: string): Promise<Record<string, unknown> | null> {
    assertValidSandboxName(name);
    const r = await this.cli(['inspect', '--format', 'json', name], 30_000);
    if (r.exitCode !== 0) {
      if (/sandbox not found/i.test(r.stderr)) return null;
      throw new SandboxError(`msb inspect failed: ${r.stderr.trim()}`, 'state-unknown');
    }
    return JSON.parse(r.stdout) as Record<string, unknown>;
  }

  async state(name: string): Promise<SandboxState> {
    try {
      const info = await this.inspect(name);
      if (!info) return 'missing';
      const status = String(info.status ?? (info.state as Record<string, unknown> | undefined)?.status ?? '');
      return status ? mapMsbStatus(status) : 'unknown';
    } catch {
      return 'unknown';
    }
  }

  async updateLimits(name: string, limits: SandboxLimits): Promise<void> {
    const r = await this.cli(['modify', '--restart', '--cpus', String(Math.max(1, Math.ceil(limits.cpus))), '--memory', `${limits.memoryMb}M`, name]);
    if (r.exitCode !== 0) throw new SandboxError(`Could not resize msb sandbox "${name}": ${r.stderr.trim()}`, 'engine-failed');
  }

  async listByPrefix(prefix: string): Promise<string[]> {
    const r = await this.cli(['list', '--quiet', '--label', `${MSB_LABEL}=1`], 30_000);
    if (r.exitCode !== 0) throw new SandboxError(`msb list failed: ${r.stderr.trim()}`, 'state-unknown');
    return r.stdout.split('\n').map((s) => s.trim()).filter((s) => s && s.startsWith(prefix)).sort();
  }

  async readSettings(name: string): Promise<SandboxSettings | null> {
    const info = await this.inspect(name);
    const labels = (info?.labels ?? (info?.config as Record<string, unknown> | undefined)?.labels) as Record<string, string> | undefined;
    const encoded = labels?.[`${MSB_LABEL}.settings`];
    return encoded ? (JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')) as SandboxSettings) : null;
  }

  async renderShimLaunch(settings: SandboxSettings): Promise<string> {
    const head = [this.binary, 'exec', '--quiet', '--no-tty', '--rlimit', `nproc=${settings.limits.pids}`].map(shellQuote).join(' ');
    return `exec ${head} --workdir "$FORGE_CWD" ${shellQuote(settings.name)} -- bash -c "$FORGE_COMMAND"`;
  }
}
