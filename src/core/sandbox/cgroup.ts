import { startProcess } from '../process/process-runner';
import { promises as fs, readFileSync } from 'node:fs';
import path from 'node:path';
import type { SandboxLimits } from './types';

/**
 * Resource limits for drivers without their own (bubblewrap): one cgroup per sandbox,
 * which every command's process joins before it execs the sandbox. Works on cgroup v2
 * (unified) and on v1/hybrid hosts (separate memory, pids and cpu hierarchies). Where
 * the host does not let Forge create or write the cgroup (typically a non-root user
 * without a delegated cgroup), the limits are reported as not enforced — never silently.
 */
export type CgroupLayout = 'v2' | 'v1' | 'none';

export interface CgroupSetup {
  /** `cgroup.procs` files a command's process must write its pid into (empty when nothing is enforced). */
  procsFiles: string[];
  /** Each limit that is not enforced, with why. */
  unenforced: string[];
}

export interface CgroupOptions {
  /** Where cgroup file systems are mounted (default /sys/fs/cgroup). */
  root?: string;
  /** Forge's parent group under each hierarchy (default "forge"). */
  parent?: string;
}

// `freezer` carries no limit: it lets Forge stop the whole sandbox while opencode's file tools
// touch the worktree on the host (see freeze()).
const V1_CONTROLLERS = ['memory', 'pids', 'cpu', 'freezer'] as const;

export class SandboxCgroups {
  private readonly root: string;
  private readonly parent: string;
  private strategy: CgroupJoinStrategy | undefined;

  constructor(options: CgroupOptions = {}) {
    this.root = options.root ?? '/sys/fs/cgroup';
    this.parent = options.parent ?? 'forge';
  }

  /** How commands join this host's cgroups; read once (see cgroupJoinStrategy). */
  joinStrategy(): CgroupJoinStrategy {
    return (this.strategy ??= cgroupJoinStrategy(readCgroupJoinFacts(this.root)));
  }

  async layout(): Promise<CgroupLayout> {
    if (await exists(path.join(this.root, 'cgroup.controllers'))) return 'v2';
    if (await exists(path.join(this.root, 'memory', 'memory.limit_in_bytes'))) return 'v1';
    return 'none';
  }

  /** Directories that make up the sandbox's cgroup (one per v1 controller, or one on v2). */
  async dirs(name: string): Promise<string[]> {
    const layout = await this.layout();
    if (layout === 'v2') return [path.join(this.root, this.parent, name)];
    if (layout === 'v1') return V1_CONTROLLERS.map((c) => path.join(this.root, c, this.parent, name));
    return [];
  }

  async exists(name: string): Promise<boolean> {
    const dirs = await this.dirs(name);
    if (dirs.length === 0) return false;
    for (const d of dirs) if (!(await exists(path.join(d, 'cgroup.procs')))) return false;
    return true;
  }

  async create(name: string, limits: SandboxLimits): Promise<CgroupSetup> {
    const layout = await this.layout();
    if (layout === 'none') {
      return { procsFiles: [], unenforced: [`cpu, memory and process limits: no cgroup file system at ${this.root}`] };
    }
    return layout === 'v2' ? this.createV2(name, limits) : this.createV1(name, limits);
  }

  private async createV2(name: string, limits: SandboxLimits): Promise<CgroupSetup> {
    const parentDir = path.join(this.root, this.parent);
    const dir = path.join(parentDir, name);
    try {
      await fs.mkdir(dir, { recursive: true });
    } catch (e) {
      return {
        procsFiles: [],
        unenforced: [`cpu, memory and process limits: cannot create cgroup ${dir} (${errCode(e)}); run as root or delegate a cgroup to this user`],
      };
    }
    const unenforced: string[] = [];
    const wanted = ['memory', 'pids', 'cpu'];
    for (const d of [this.root, parentDir]) {
      for (const c of wanted) {
        await fs.writeFile(path.join(d, 'cgroup.subtree_control'), `+${c}`).catch(() => undefined);
      }
    }
    const available = (await fs.readFile(path.join(dir, 'cgroup.controllers'), 'utf8').catch(() => '')).split(/\s+/);
    const write = async (what: string, controller: string, file: string, value: string) => {
      if (!available.includes(controller)) {
        unenforced.push(`${what}: the ${controller} controller is not available to ${dir}`);
        return;
      }
      try {
        await fs.writeFile(path.join(dir, file), value);
      } catch (e) {
        unenforced.push(`${what}: cannot write ${path.join(dir, file)} (${errCode(e)})`);
      }
    };
    await write('memory limit', 'memory', 'memory.max', String(limits.memoryMb * 1024 * 1024));
    await fs.writeFile(path.join(dir, 'memory.swap.max'), '0').catch(() => undefined);
    await write('process limit', 'pids', 'pids.max', String(limits.pids));
    await write('cpu limit', 'cpu', 'cpu.max', `${Math.round(limits.cpus * 100_000)} 100000`);
    return { procsFiles: [path.join(dir, 'cgroup.procs')], unenforced };
  }

  private async createV1(name: string, limits: SandboxLimits): Promise<CgroupSetup> {
    const unenforced: string[] = [];
    const procsFiles: string[] = [];
    const settings: Record<(typeof V1_CONTROLLERS)[number], { what: string; files: [string, string][] }> = {
      memory: {
        what: 'memory limit',
        files: [['memory.limit_in_bytes', String(limits.memoryMb * 1024 * 1024)]],
      },
      pids: { what: 'process limit', files: [['pids.max', String(limits.pids)]] },
      cpu: {
        what: 'cpu limit',
        files: [
          ['cpu.cfs_period_us', '100000'],
          ['cpu.cfs_quota_us', String(Math.round(limits.cpus * 100_000))],
        ],
      },
      freezer: { what: 'freezing the sandbox during file tool calls', files: [] },
    };
    for (const controller of V1_CONTROLLERS) {
      const { what, files } = settings[controller];
      const hierarchy = path.join(this.root, controller);
      if (!(await exists(path.join(hierarchy, 'cgroup.procs')))) {
        unenforced.push(`${what}: no ${controller} cgroup hierarchy at ${hierarchy}`);
        continue;
      }
      const dir = path.join(hierarchy, this.parent, name);
      try {
        await fs.mkdir(dir, { recursive: true });
        for (const [file, value] of files) await fs.writeFile(path.join(dir, file), value);
        procsFiles.push(path.join(dir, 'cgroup.procs'));
      } catch (e) {
        unenforced.push(`${what}: cannot set up cgroup ${dir} (${errCode(e)}); run as root or delegate a cgroup to this user`);
      }
    }
    if (procsFiles.some((f) => f.includes(`${path.sep}memory${path.sep}`))) {
      // Without swap accounting the memsw file is absent and there is no swap to limit.
      await fs
        .writeFile(path.join(this.root, 'memory', this.parent, name, 'memory.memsw.limit_in_bytes'), String(limits.memoryMb * 1024 * 1024))
        .catch(() => undefined);
    }
    return { procsFiles, unenforced };
  }

  /**
   * A cgroup that only tracks processes (no limit is set): an unconfined loop's, so everything
   * its agent starts — `setsid`, double forks and `nohup` included, whatever environment it
   * keeps — can be found and killed (`remove`). Tried in order: Forge's parent group (v2
   * `<root>/<parent>/<name>`, v1 the pids hierarchy; needs root), then a child of this
   * process's own cgroup v2 where that is delegated to the user (systemd's user sessions). A
   * process joining it is proved once with a real child, so a cgroup that can be made but not
   * joined is reported, never assumed.
   */
  async track(name: string): Promise<{ procsFiles: string[] } | { reason: string }> {
    const layout = await this.layout();
    const candidates: string[] = [];
    const reasons: string[] = [];
    if (layout === 'v2') candidates.push(path.join(this.root, this.parent, name));
    // On v1 the pids hierarchy must be a mounted cgroup (a plain folder of the tmpfs above it would "work" and track nothing).
    else if (layout === 'v1' && (await exists(path.join(this.root, 'pids', 'cgroup.procs')))) candidates.push(path.join(this.root, 'pids', this.parent, name));
    else reasons.push(layout === 'none' ? `no cgroup file system at ${this.root}` : `no pids cgroup hierarchy at ${path.join(this.root, 'pids')}`);
    const delegated = await this.delegatedDir(name);
    if (delegated) candidates.push(delegated);
    for (const dir of candidates) {
      const joined = await joinProbe(dir);
      if (joined === null) return { procsFiles: [path.join(dir, 'cgroup.procs')] };
      reasons.push(joined);
    }
    return { reason: `${reasons.join('; ')}: Forge needs root or a cgroup v2 delegated to this user` };
  }

  /** `<name>` under this process's own cgroup v2 (where a delegated one can be), or null when there is none apart from the root. */
  private async delegatedDir(name: string): Promise<string | null> {
    const mount = (await exists(path.join(this.root, 'cgroup.controllers')))
      ? this.root
      : (await exists(path.join(this.root, 'unified', 'cgroup.controllers')))
        ? path.join(this.root, 'unified')
        : null;
    if (!mount) return null;
    const own = ownCgroupV2Path(await fs.readFile('/proc/self/cgroup', 'utf8').catch(() => ''));
    if (!own || own === '/') return null;
    return path.join(mount, own, name);
  }

  /** Names of Forge's cgroups (under `parent` in every hierarchy, and under this process's own cgroup v2) that start with `prefix`. */
  async listByPrefix(prefix: string): Promise<string[]> {
    const layout = await this.layout();
    const parents = layout === 'v2' ? [path.join(this.root, this.parent)] : layout === 'v1' ? V1_CONTROLLERS.map((c) => path.join(this.root, c, this.parent)) : [];
    const delegated = await this.delegatedDir('');
    if (delegated) parents.push(delegated);
    const names = new Set<string>();
    for (const parent of parents) {
      const entries = await fs.readdir(parent, { withFileTypes: true }).catch(() => []);
      for (const e of entries) if (e.isDirectory() && e.name.startsWith(prefix)) names.add(e.name);
    }
    return [...names].sort();
  }

  /** Out-of-memory kills recorded by the sandbox's memory cgroup, when readable. */
  async oomKills(name: string): Promise<number | undefined> {
    const layout = await this.layout();
    const file =
      layout === 'v2'
        ? path.join(this.root, this.parent, name, 'memory.events')
        : path.join(this.root, 'memory', this.parent, name, 'memory.oom_control');
    const text = await fs.readFile(file, 'utf8').catch(() => '');
    const m = /^oom_kill (\d+)/m.exec(text);
    return m ? Number(m[1]) : undefined;
  }

  /**
   * Freezes every process of the sandbox (cgroup v2 `cgroup.freeze`, v1 `freezer.state`) and
   * resolves once the kernel reports the whole group frozen, so nothing in the sandbox can change
   * the worktree until the returned thaw runs. Null when the sandbox has no freezable cgroup.
   */
  async freeze(name: string): Promise<(() => Promise<void>) | null> {
    const layout = await this.layout();
    const dir = layout === 'v2' ? path.join(this.root, this.parent, name) : path.join(this.root, 'freezer', this.parent, name);
    const [file, on, off] = layout === 'v2' ? ['cgroup.freeze', '1', '0'] : ['freezer.state', 'FROZEN', 'THAWED'];
    if (layout === 'none') return null;
    try {
      await fs.writeFile(path.join(dir, file), on);
    } catch {
      return null;
    }
    const thaw = () => fs.writeFile(path.join(dir, file), off).catch(() => undefined);
    const frozen = async () =>
      layout === 'v2'
        ? /^frozen 1$/m.test(await fs.readFile(path.join(dir, 'cgroup.events'), 'utf8'))
        : (await fs.readFile(path.join(dir, 'freezer.state'), 'utf8')).trim() === 'FROZEN';
    for (let i = 0; !(await frozen().catch(() => false)); i++) {
      if (i >= 2000) {
        await thaw();
        throw new Error(`The sandbox cgroup ${dir} did not freeze.`);
      }
      await new Promise((r) => setImmediate(r));
    }
    return thaw;
  }

  /** Kills every process still in the sandbox's cgroup and removes it. */
  async remove(name: string): Promise<void> {
    const delegated = await this.delegatedDir(name);
    const dirs = [...(await this.dirs(name)), ...(delegated ? [delegated] : [])];
    // A frozen task only dies once thawed.
    for (const dir of dirs) {
      await fs.writeFile(path.join(dir, 'cgroup.freeze'), '0').catch(() => undefined);
      await fs.writeFile(path.join(dir, 'freezer.state'), 'THAWED').catch(() => undefined);
    }
    for (let attempt = 0; attempt < 50; attempt++) {
      let left = 0;
      for (const dir of dirs) {
        if (!(await exists(dir))) continue;
        await fs.writeFile(path.join(dir, 'cgroup.kill'), '1').catch(() => undefined);
        const procs = (await fs.readFile(path.join(dir, 'cgroup.procs'), 'utf8').catch(() => ''))
          .split('\n')
          .filter(Boolean)
          .map(Number);
        for (const pid of procs) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // Exited meanwhile.
          }
        }
        try {
          await fs.rmdir(dir);
        } catch (e) {
          if (errCode(e) !== 'ENOENT') left++;
        }
      }
      if (left === 0) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`Could not remove the sandbox cgroup of "${name}": processes keep running in it.`);
  }
}

/** This process's cgroup v2 path (the `0::` line of /proc/self/cgroup), or null. */
export function ownCgroupV2Path(procSelfCgroup: string): string | null {
  const line = procSelfCgroup.split('\n').find((l) => l.startsWith('0::'));
  return line ? line.slice(3).trim() || null : null;
}

/** Makes `dir` and moves a short-lived child into it: null when that worked, else why not (the folder is removed again). */
async function joinProbe(dir: string): Promise<string | null> {
  try {
    await fs.mkdir(dir, { recursive: true });
  } catch (e) {
    return `cannot create the cgroup ${dir} (${errCode(e)})`;
  }
  const procsFile = path.join(dir, 'cgroup.procs');
  const probe = startProcess('sleep', ['30'], { output: 'ignore' });
  try {
    if (!probe.pid) throw Object.assign(new Error('could not start a probe process'), { code: 'ESPAWN' });
    await fs.writeFile(procsFile, String(probe.pid));
    const inside = (await fs.readFile(procsFile, 'utf8')).split('\n').includes(String(probe.pid));
    if (!inside) throw Object.assign(new Error('the probe process is not listed'), { code: 'ENOTJOINED' });
    return null;
  } catch (e) {
    await fs.rmdir(dir).catch(() => undefined);
    return `cannot move a process into the cgroup ${dir} (${errCode(e)})`;
  } finally {
    probe.kill('SIGKILL');
  }
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.access(p);
    return true;
  } catch {
    return false;
  }
}

export function errCode(e: unknown): string {
  return (e as NodeJS.ErrnoException)?.code ?? String(e);
}

/**
 * How a sandboxed command's processes join the sandbox's cgroup.
 * - `before-exec`: the launcher writes its own pid into each `cgroup.procs`, then execs bwrap,
 *   so bwrap and everything it starts are inside. One write per hierarchy, no extra process.
 * - `overlapped`: bwrap reports the sandbox's first process and waits for a go byte while a
 *   helper forked beforehand moves that process in, so the join overlaps bwrap's set-up.
 *
 * A write to `cgroup.procs` waits for an RCU grace period, unless grace periods are expedited
 * (`/sys/kernel/rcu_expedited` = 1) or the hierarchy is mounted with `favordynmods` (the
 * kernel then skips that wait). Where the write is that cheap, the helper's fork and its
 * pipes cost more than the join they hide (measured with bench/sandbox.mjs: 0.05–3 ms per
 * write on this kernel against ~5 ms of forks), so the launcher joins in line.
 */
export type CgroupJoinStrategy = 'before-exec' | 'overlapped';

export interface CgroupJoinFacts {
  /** `/sys/kernel/rcu_expedited` reads 1. */
  rcuExpedited: boolean;
  /** The mount options of each cgroup (v1) and cgroup2 file system under the cgroup root. */
  cgroupMountOptions: string[][];
}

export function cgroupJoinStrategy(facts: CgroupJoinFacts): CgroupJoinStrategy {
  if (facts.rcuExpedited) return 'before-exec';
  const mounts = facts.cgroupMountOptions;
  if (mounts.length > 0 && mounts.every((options) => options.includes('favordynmods'))) return 'before-exec';
  return 'overlapped';
}

/** Parses `/proc/self/mounts` for the cgroup file systems mounted at or under `root`. */
export function cgroupMountOptionsOf(mountsText: string, root: string): string[][] {
  const under = root.endsWith('/') ? root : `${root}/`;
  const result: string[][] = [];
  for (const line of mountsText.split('\n')) {
    const [, mountPoint, type, options] = line.split(' ');
    if (!mountPoint || (type !== 'cgroup' && type !== 'cgroup2')) continue;
    if (mountPoint !== root && !mountPoint.startsWith(under)) continue;
    result.push((options ?? '').split(','));
  }
  return result;
}

/** Reads the facts `cgroupJoinStrategy` decides on; unreadable files count as "not cheap". */
export function readCgroupJoinFacts(
  root = '/sys/fs/cgroup',
  files: { rcuExpedited?: string; mounts?: string } = {},
): CgroupJoinFacts {
  const read = (file: string) => {
    try {
      return readFileSync(file, 'utf8');
    } catch {
      return '';
    }
  };
  return {
    rcuExpedited: read(files.rcuExpedited ?? '/sys/kernel/rcu_expedited').trim() === '1',
    cgroupMountOptions: cgroupMountOptionsOf(read(files.mounts ?? '/proc/self/mounts'), root),
  };
}
