/**
 * Sandboxed loops end to end (SPEC §5), for the docker and bwrap drivers: real opencode, real
 * git, real database, the real engine and sandbox; only the model is scripted. The coder's
 * `bash` tool calls go through Forge's shims into the loop's sandbox, and each check reads
 * the tool result opencode sent back to the model plus the host's file system.
 *
 * One harness per driver, two loops:
 * - loop A (network off): confinement, host loopback unreachable, memory and process limits,
 *   the same sandbox across sessions, across a change of the driver setting and across a forced
 *   restart (resumed, not recreated), gone at the end;
 * - loop B (network on): host loopback reachable, the sandbox removed out of band mid-session
 *   (the command fails, the loop ends reporting the loss), orphan cleanup at its teardown
 *   (a finished loop's sandbox removed, a running loop's kept), then a restart on a new sandbox.
 * Plus a loop start refused when the engine cannot be reached, leaving nothing behind.
 *
 * The state mapping itself (running, stopped, missing, unknown → create refused) is covered
 * per driver by the contract tests: test/support/sandbox-contract.ts ("maps states: …"),
 * run by test/core/sandbox/docker.test.ts and bwrap.test.ts.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { defaultSettings, type ForgeSettings } from '../../../src/core/config/settings';
import { createForgeEngine } from '../../../src/core/engine';
import { LoopRuntimeError, type LoopRef, type LoopRuntimeEvent } from '../../../src/core/loop/runtime-types';
import { BwrapRuntime } from '../../../src/core/sandbox/bwrap-driver';
import { SandboxCgroups } from '../../../src/core/sandbox/cgroup';
import { SandboxManager, sandboxPrefixForDataDir, type LoopSandboxRequest } from '../../../src/core/sandbox/manager';
import { OciRuntime } from '../../../src/core/sandbox/oci-driver';
import type { SandboxRuntime } from '../../../src/core/sandbox/types';
import { defaultSqlWasmPath } from '../../../src/core/storage';
import { createForgeRepositories } from '../../../src/core/storage/repositories';
import { createLoopHarness, REPO_ROOT, roleOf, type AgentRole, type LoopHarness } from '../../support/loop-harness';
import { MOCK_MODEL } from '../../support/opencode-test-env';
import { bwrapPrereqs, dockerPrereqs, sandboxTestTempRoot, startHostListener, TEST_IMAGE, type HostListener, withDockerHost } from '../../support/sandbox-fixtures';
import { hang, text, toolCall, toolCalls, type ScriptedRequest, type ScriptStep } from '../../support/scripted-model';

type Driver = 'docker' | 'bwrap';

interface DriverCase {
  driver: Driver;
  /** Installs/starts what the driver needs; returns the environment its engine CLI needs. */
  prereqs(): NodeJS.ProcessEnv;
  /** The driver's runtime as the engine makes it, to look at sandboxes from the host. */
  runtime(dataDir: string, env: NodeJS.ProcessEnv): SandboxRuntime;
  /** What stays the same while a sandbox lives: the container id, or bwrap's record and cgroup. */
  identity(name: string, dataDir: string, env: NodeJS.ProcessEnv): Promise<string>;
  /** Out-of-memory kills the sandbox's cgroup has seen. */
  oomKills(name: string, env: NodeJS.ProcessEnv): Promise<number>;
  /** Removes a sandbox behind Forge's back (as a user or another tool would). */
  removeOutOfBand(name: string, dataDir: string, env: NodeJS.ProcessEnv): Promise<void>;
  /** Engine options under which the driver's engine cannot be reached or read, and the refusal expected. */
  unreachable(dataDir: string, env: NodeJS.ProcessEnv): { env: NodeJS.ProcessEnv; message: RegExp };
  /** The driver the other case's setting names (flipped to mid-loop). */
  other: Driver;
}

function docker(env: NodeJS.ProcessEnv, ...args: string[]): string {
  const r = spawnSync('docker', args, { env, encoding: 'utf8', timeout: 120_000 });
  if (r.status !== 0) throw new Error(`docker ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout.trim();
}

function parseOomKills(text: string): number {
  const m = /^oom_kill (\d+)$/m.exec(text);
  if (!m) throw new Error(`no oom_kill counter in:\n${text}`);
  return Number(m[1]);
}

const cases: DriverCase[] = [
  {
    driver: 'docker',
    prereqs: dockerPrereqs,
    runtime: (_dataDir, env) => new OciRuntime({ engine: 'docker', env }),
    identity: async (name, _dataDir, env) => docker(env, 'inspect', '--type', 'container', '--format', '{{.Id}}', name),
    oomKills: async (name, env) =>
      parseOomKills(docker(env, 'exec', name, 'sh', '-c', 'cat /sys/fs/cgroup/memory.events 2>/dev/null || cat /sys/fs/cgroup/memory/memory.oom_control')),
    removeOutOfBand: async (name, _dataDir, env) => void docker(env, 'rm', '-f', name),
    unreachable: (dataDir, env) => ({
      env: { ...env, DOCKER_HOST: `unix://${dataDir}/no-docker-here.sock` },
      // A driver the user named that cannot run refuses the start (never an unconfined fallback).
      message: /The sandbox driver "docker" chosen in forge\.sandbox\.driver is not available: docker is installed but its engine does not answer.*The loop was not started: forge\.sandbox\.driver names this driver/s,
    }),
    other: 'bwrap',
  },
  {
    driver: 'bwrap',
    prereqs: () => {
      bwrapPrereqs();
      return { ...process.env };
    },
    runtime: (dataDir) => new BwrapRuntime({ stateDir: path.join(dataDir, 'sandboxes') }),
    identity: async (name, dataDir) => {
      // The record (content and file) and the cgroup every command joins.
      const file = path.join(dataDir, 'sandboxes', `${name}.json`);
      const { ino, mtimeMs } = statSync(file);
      const cgroups = await new SandboxCgroups().dirs(name);
      const live = cgroups.length > 0 && cgroups.every((d) => existsSync(path.join(d, 'cgroup.procs')));
      return JSON.stringify({ record: readFileSync(file, 'utf8'), ino, mtimeMs, cgroups, live });
    },
    oomKills: async (name) => {
      for (const dir of await new SandboxCgroups().dirs(name)) {
        for (const file of ['memory.events', 'memory.oom_control']) {
          if (existsSync(path.join(dir, file))) return parseOomKills(readFileSync(path.join(dir, file), 'utf8'));
        }
      }
      throw new Error(`no memory cgroup for ${name}`);
    },
    removeOutOfBand: async (name, dataDir) => {
      rmSync(path.join(dataDir, 'sandboxes', `${name}.json`));
      // Drop its cgroup too, as a reboot would; remove() waits out the EBUSY of a command that just ended.
      await new SandboxCgroups().remove(name);
    },
    unreachable: (dataDir, env) => {
      // The sandbox store cannot be read (its folder is a regular file): every state is unknown.
      writeFileSync(path.join(dataDir, 'sandboxes'), 'not a folder');
      return { env, message: /The sandbox could not start, so the loop was not started: Cannot tell whether the sandbox "forge-[0-9a-f]{6}-[a-z0-9-]+" exists \(the bwrap engine did not answer\), so Forge neither creates nor removes it/ };
    },
    other: 'docker',
  },
];

/** Temporary folders outside /tmp: a sandbox has its own /tmp, which would hide "next to the worktree" writes. */
/** Loop names stay unique when mocha retries a test against the same data folder. */
let attempts = 0;

function cacheTempDir(label: string): string {
  return mkdtempSync(path.join(sandboxTestTempRoot(), `${label}-`));
}

function cacheTempDirIn(parent: string, label: string): string {
  return mkdtempSync(path.join(parent, `${label}-`));
}

/** A shell word that spells `value` without showing it as one literal (opencode's bash tool looks for paths outside the worktree in commands). */
function hidden(value: string): string {
  const cut = Math.max(1, Math.floor(value.length / 2));
  return `"$(printf %s '${value.slice(0, cut)}' '${value.slice(cut)}')"`;
}

type Step = ScriptStep | ((request: ScriptedRequest) => ScriptStep | Promise<ScriptStep>);
/** Answers every request of one session; `turn` counts that session's requests from 0. */
type SessionHandler = (request: ScriptedRequest, turn: number) => ScriptStep | Promise<ScriptStep>;

/** A session that takes its steps in order (a step may be a host-side action returning the step), then says "Done.". */
function steps(...list: Step[]): SessionHandler {
  return (request, turn) => {
    const step = list[turn];
    if (!step) return text('Done.');
    return typeof step === 'function' ? step(request) : step;
  };
}

/** Per-session scripts; every tool result the model receives is recorded by its tool-call id. */
function sessionScript(plan: (role: AgentRole, nth: number) => SessionHandler) {
  const sessions = new Map<string, { handle: SessionHandler; turns: number }>();
  const counts: Record<AgentRole, number> = { code: 0, auditor: 0 };
  const results = new Map<string, string>();
  /** Host-side checks that threw inside the model (asserted by the test, not lost in opencode's retries). */
  const errors: string[] = [];
  const handler = async (request: ScriptedRequest): Promise<ScriptStep> => {
    for (const r of request.toolResults) results.set(r.toolCallId, r.content);
    const sid = request.sessionId ?? 'unknown';
    let session = sessions.get(sid);
    if (!session) {
      const role = roleOf(request);
      session = { handle: plan(role, ++counts[role]), turns: 0 };
      sessions.set(sid, session);
    }
    try {
      return await session.handle(request, session.turns++);
    } catch (error) {
      errors.push((error as Error).stack ?? String(error));
      return text('A host-side check failed.');
    }
  };
  return { handler, counts, results, errors };
}

const lastBashResult = (request: ScriptedRequest) => request.toolResults.find((r) => r.name === 'bash')?.content ?? '';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A file in the sandbox's private /tmp: it outlives a session only where the sandbox does (docker). */
const MARKER = '/tmp/forge-phase-marker';

let callCounter = 0;
/** A `bash` tool call with a known id, so its result can be found in `results`. */
function bash(id: string, command: string, timeoutMs?: number): ScriptStep {
  return toolCalls([{ id: `${id}-${++callCounter}`, name: 'bash', args: { command, description: id, ...(timeoutMs ? { timeout: timeoutMs } : {}) } }]);
}
function resultOf(results: Map<string, string>, id: string): string {
  const hits = [...results.entries()].filter(([k]) => k.startsWith(`${id}-`));
  assert.ok(hits.length > 0, `no tool result for ${id} reached the model (results: ${[...results.keys()].join(', ')})`);
  return hits[hits.length - 1]![1];
}

const handoffCoder = (what: string) => toolCall('forge_loop_handoff', { decisions: what, verification: 'ran the commands', notesForAuditor: '' });
const handoffAuditor = (done: boolean) => toolCall('forge_loop_handoff', { summary: 'reviewed', done, deviations: '', followUps: '' });

for (const c of cases) {
  describe(`sandboxed loops end to end: ${c.driver} (real opencode, scripted model)`, function () {
    this.timeout(15 * 60_000);
    let env: NodeJS.ProcessEnv;
    let h: LoopHarness;
    let dataDir: string;
    let prefix: string;
    let runtime: SandboxRuntime;
    let listener: HostListener;
    /** Sandboxes the test made itself (with its own manager), removed at the end. */
    const testSandboxes: string[] = [];

    before(async function () {
      this.timeout(30 * 60_000);
      env = c.prereqs();
      dataDir = cacheTempDir(`loop-${c.driver}`);
      // The engine's sandbox runtime takes its environment from the engine's `env` option,
      // which the harness builds from process.env: the project's private dockerd.
      h = await withDockerHost(env.DOCKER_HOST, () =>
        createLoopHarness({
          dataDir,
          settings: {
            'forge.sandbox.enabled': true,
            'forge.sandbox.driver': c.driver,
            'forge.sandbox.image': TEST_IMAGE,
            'forge.sandbox.network': false,
            'forge.sandbox.cpus': 1,
            'forge.sandbox.memoryMb': 128,
            'forge.sandbox.pidsLimit': 64,
            'forge.loop.stallTimeoutMs': 60_000,
          },
        }),
      );
      prefix = sandboxPrefixForDataDir(dataDir);
      runtime = c.runtime(dataDir, env);
      listener = await startHostListener();
    });

    after(async function () {
      this.timeout(5 * 60_000);
      await h?.close();
      await listener?.close();
      // Whatever a failed test left: the test's own sandboxes and any of this data folder.
      if (runtime) {
        const left = new Set([...testSandboxes, ...(await runtime.listByPrefix(prefix).catch(() => [] as string[]))]);
        for (const name of left) await runtime.remove(name).catch(() => undefined);
      }
      if (dataDir) rmSync(dataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
    });

    const sandboxOf = (loopName: string) => `${prefix}${loopName}`;
    const worktreeOf = (ref: LoopRef) => h.engine.runtime.get(ref)!.worktreeDir!;
    const endOf = async (ref: LoopRef) => {
      const end = await h.engine.runtime.waitForEnd(ref);
      assert.equal(end.type, 'loop.ended');
      return end as Extract<LoopRuntimeEvent, { type: 'loop.ended' }>;
    };
    /** A manager like the engine's (same runtime kind and prefix), as a killed Forge process would have had. */
    const testManager = (running: (loop: string) => boolean) => new SandboxManager({ runtime, prefix, isLoopRunning: running });
    const request = (loopName: string, worktreeDir: string, gitCommonDir: string): LoopSandboxRequest => ({
      loopName,
      worktreeDir,
      gitCommonDir,
      network: false,
      limits: { cpus: 1, memoryMb: 128, pids: 64 },
      image: TEST_IMAGE,
    });

    it('refuses a loop start when the engine cannot be reached, with a clear error, and leaves nothing behind', async () => {
      const otherDataDir = cacheTempDir(`loop-${c.driver}-unreachable`);
      const { env: brokenEnv, message } = c.unreachable(otherDataDir, { ...process.env, ...h.env.env, ...env });
      const settings: ForgeSettings = { ...h.settings };
      const engine = await createForgeEngine({
        dataDir: otherDataDir,
        settings: () => settings,
        log: { debug: () => {}, info: () => {}, warn: () => {}, error: (m) => console.error(m) },
        assetsDir: path.join(REPO_ROOT, 'dist'),
        agentsDir: path.join(REPO_ROOT, 'src/core/opencode/agents'),
        wasmPath: defaultSqlWasmPath(),
        env: brokenEnv,
        opencodeExtraEnv: h.env.env,
      });
      try {
        const started: LoopRuntimeEvent[] = [];
        engine.runtime.subscribe((e) => started.push(e));
        const error = await engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'Never starts', name: 'never-starts' }).then(
          () => assert.fail('the loop start must be refused'),
          (e: unknown) => e,
        );
        assert.ok(error instanceof LoopRuntimeError, String(error));
        assert.equal(error.code, 'sandbox');
        assert.match(error.message, message);
        // Nothing behind: no loop row, no worktree (folder or git registration), no sandbox, no shims, no event.
        const { projectId } = await engine.runtime.projectOf(h.repo.dir);
        assert.ok(!engine.runtime.get({ projectId, name: 'never-starts' }), 'no loop row');
        assert.deepEqual(engine.runtime.list(projectId), []);
        assert.equal(existsSync(path.join(otherDataDir, 'worktrees', 'never-starts')), false);
        assert.doesNotMatch(await h.repo.git('worktree', 'list'), /never-starts/);
        const refusedName = `${sandboxPrefixForDataDir(otherDataDir)}never-starts`;
        assert.equal(existsSync(path.join(otherDataDir, 'sandbox-shims', refusedName)), false);
        // docker: no container on the (reachable) daemon; bwrap: its store stays unreadable and untouched.
        assert.equal(await c.runtime(otherDataDir, env).state(refusedName), c.driver === 'bwrap' ? 'unknown' : 'missing');
        for (const d of await new SandboxCgroups().dirs(refusedName)) assert.equal(existsSync(d), false, `no cgroup ${d}`);
        assert.deepEqual(started.filter((e) => e.type === 'loop.started'), [], 'no loop.started event for a refused start');
        // A branch left at the start commit is kept by design (no work on it; createWorktree reuses it).
        const branch = (await h.repo.git('branch', '--list', 'forge/never-starts')).trim();
        if (branch) assert.equal((await h.repo.git('rev-parse', 'forge/never-starts')).trim(), (await h.repo.git('rev-parse', 'main')).trim());
      } finally {
        await engine.close();
        rmSync(otherDataDir, { recursive: true, force: true });
      }
    });

    it('loop A (network off): worktree writes land, escapes fail, host loopback unreachable, limits hold, one sandbox across sessions and a forced restart, gone at the end', async () => {
      const tag = `forge-loop-sbx-${process.pid}-${c.driver}`;
      let ref!: LoopRef;
      const identities: string[] = [];
      const oomKills: number[] = [];
      let forcedRestart: Promise<void> | undefined;
      let flippedStatus: { available: boolean; driver: string | null; reason: string | null } | undefined;
      const outside = () => {
        const wt = worktreeOf(ref);
        return { etc: path.join('/etc', tag), home: path.join(os.homedir(), tag), beside: path.join(path.dirname(wt), tag) };
      };
      const script = sessionScript((role, nth) => {
        if (role === 'code' && nth === 1) {
          return steps(
            async () => {
              identities.push(await c.identity(sandboxOf(ref.name), dataDir, env));
              return bash('write', `echo written-inside > inside.txt; echo "write-rc=$?"; echo "host=$(hostname) pwd=$(pwd)"; echo kept > ${hidden(MARKER)}`);
            },
            () => {
              const o = outside();
              return bash(
                'escape',
                [
                  `echo x > ${hidden(o.etc)}; echo "etc-rc=$?"`,
                  `echo x > ${hidden(o.home)}; echo "home-rc=$?"`,
                  `echo x > ${hidden(o.beside)}; echo "beside-rc=$?"`,
                ].join('\n'),
              );
            },
            bash('net-off', `( exec 3<>${hidden(`/dev/tcp/127.0.0.1/${listener.port}`)} && head -c 4 <&3 ); echo "net-rc=$?"`, 60_000),
            async () => {
              // A changed driver setting applies to new loops only: this loop keeps its sandbox.
              h.settings['forge.sandbox.driver'] = c.other;
              flippedStatus = await h.engine.sandboxStatus();
              return handoffCoder('ran the confinement commands');
            },
          );
        }
        if (role === 'auditor' && nth === 1) {
          return steps(
            async () => {
              identities.push(await c.identity(sandboxOf(ref.name), dataDir, env));
              return bash('marker', `cat ${hidden(MARKER)}; echo "marker-rc=$?"; cat inside.txt`);
            },
            () => {
              // The user force-restarts the running loop mid-audit (with the driver setting
              // still changed): the new supervisor must resume this sandbox, not make another.
              forcedRestart = h.engine.runtime.restart(ref, { force: true });
              forcedRestart.catch(() => undefined); // awaited by the test; not an unhandled rejection meanwhile
              return hang;
            },
          );
        }
        if (role === 'auditor' && nth === 2) {
          return steps(
            async () => {
              identities.push(await c.identity(sandboxOf(ref.name), dataDir, env));
              return bash('resumed', `cat ${hidden(MARKER)}; echo "resumed-rc=$?"`);
            },
            toolCall('forge_review_write', { file: 'GOAL', line: 0, severity: 'warning', description: 'Now try the limits.' }),
            handoffAuditor(false),
          );
        }
        if (role === 'code' && nth === 2) {
          return steps(
            async () => {
              identities.push(await c.identity(sandboxOf(ref.name), dataDir, env));
              oomKills.push(await c.oomKills(sandboxOf(ref.name), env));
              return bash('memory', 'head -c 400M /dev/zero | tail > /dev/null; echo "memory-rc=${PIPESTATUS[1]}"', 120_000);
            },
            async () => {
              oomKills.push(await c.oomKills(sandboxOf(ref.name), env));
              return bash('fork-bomb', 'bomb() { bomb | bomb & }; bomb; sleep 5; echo fork-bomb-over', 120_000);
            },
            handoffCoder('ran the limit commands'),
          );
        }
        if (role === 'auditor' && nth === 3) {
          // The bomb's processes may take a moment to be reaped: ask again a few times.
          let attempts = 0;
          let stage: 'probe' | 'delete' | 'handoff' = 'probe';
          return async (request, turn) => {
            if (stage === 'probe') {
              if (turn > 0 && (/^alive$/m.test(lastBashResult(request)) || attempts >= 15)) {
                identities.push(await c.identity(sandboxOf(ref.name), dataDir, env));
                stage = 'delete';
                return toolCall('forge_review_delete', { file: 'GOAL', line: 0 });
              }
              if (turn > 0) await sleep(2000);
              attempts++;
              return bash('alive', `echo alive; cat ${hidden(MARKER)}`);
            }
            if (stage === 'delete') {
              stage = 'handoff';
              return handoffAuditor(true);
            }
            return text('Done.');
          };
        }
        return steps(handoffAuditor(true));
      });
      h.model.setHandler(script.handler);
      try {
        ref = await h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'Sandbox confinement', name: `confine-${c.driver}-${++attempts}` });
        const stored = h.engine.runtime.get(ref)!.state.sandboxConfig as { driver: string; network: boolean } | undefined;
        assert.deepEqual(stored && { driver: stored.driver, network: stored.network }, { driver: c.driver, network: false }, 'the loop keeps the sandbox it started with');
        const first = await h.engine.runtime.waitForEnd(ref);
        assert.equal(first.type, 'loop.supervision_lost', `the forced restart took the loop over: ${JSON.stringify(first)}`);
        assert.ok(forcedRestart, 'the auditor asked for the forced restart');
        await forcedRestart;
        const end = await endOf(ref);
        assert.equal(end.status, 'completed', JSON.stringify(end));
      } finally {
        h.settings['forge.sandbox.driver'] = c.driver;
      }
      assert.deepEqual(script.errors, [], 'host-side checks during the loop');
      const wt = worktreeOf(ref);
      const r = script.results;

      // 1. Worktree writes land on the host; /etc, $HOME and a path beside the worktree do not.
      const write = resultOf(r, 'write');
      assert.match(write, /write-rc=0/);
      assert.match(write, new RegExp(`host=forge-sandbox pwd=${wt}`), 'the command ran in the sandbox, in the worktree');
      assert.notEqual(os.hostname(), 'forge-sandbox');
      assert.equal(readFileSync(path.join(wt, 'inside.txt'), 'utf8'), 'written-inside\n');
      const escape = resultOf(r, 'escape');
      for (const what of ['etc', 'home', 'beside']) assert.match(escape, new RegExp(`${what}-rc=[1-9]`), `writing ${what} must fail: ${escape}`);
      assert.match(escape, /Read-only file system|No such file or directory|Permission denied/, 'the shell inside the sandbox refused the writes');
      for (const target of Object.values(outside())) assert.equal(existsSync(target), false, `${target} must not appear on the host`);

      // 2. Network off: the host's 127.0.0.1 listener is out of reach.
      assert.match(resultOf(r, 'net-off'), /net-rc=[1-9]/);
      assert.doesNotMatch(resultOf(r, 'net-off'), /pong/);
      assert.equal(listener.connections(), 0);

      // 3. Memory and process limits: killed and reported, contained; the loop went on to completion.
      const memory = resultOf(r, 'memory');
      assert.match(memory, /memory-rc=137/, `the memory hog is SIGKILLed: ${memory}`);
      assert.match(memory, /Killed/, 'the tool result says the command was killed');
      assert.equal(oomKills.length, 2);
      assert.ok(oomKills[1]! > oomKills[0]!, `the sandbox's cgroup recorded an out-of-memory kill (${oomKills.join(' → ')})`);
      const bomb = resultOf(r, 'fork-bomb');
      assert.match(bomb, /fork: (retry: )?Resource temporarily unavailable/, `forks were refused by the process limit: ${bomb.slice(0, 2000)}`);
      assert.equal(spawnSync('true').status, 0, 'the host still forks');
      assert.match(resultOf(r, 'alive'), /^alive$/m, `the sandbox runs commands again after the bomb: ${resultOf(r, 'alive')}`);

      // 4. One sandbox across sessions (coder, auditor, auditor after a forced restart, coder,
      //    auditor), despite the driver setting changing mid-loop.
      assert.equal(identities.length, 5, 'identity seen in five sessions');
      const edges = createForgeRepositories(h.engine.db).transitions.listByLoop(h.projectId, ref.name).map((t) => `${t.event}:${t.fromPhase ?? '-'}>${t.toPhase ?? '-'}`);
      assert.ok(edges.includes('force_restart:auditing>auditing'), edges.join(', '));
      assert.equal(new Set(identities).size, 1, `the same sandbox in every session: ${identities.join(' | ')}`);
      if (c.driver === 'docker') {
        assert.match(resultOf(r, 'marker'), /^kept$/m, 'a file in the sandbox\'s /tmp outlives the session');
        assert.match(resultOf(r, 'resumed'), /^kept$/m, 'and the forced restart: the sandbox was resumed, not recreated');
        assert.match(resultOf(r, 'alive'), /^kept$/m);
      } else {
        // bwrap gives every command a fresh /tmp by design; state lives in the worktree.
        assert.match(resultOf(r, 'marker'), /marker-rc=[1-9]/);
        assert.match(resultOf(r, 'marker'), /written-inside/);
        assert.match(resultOf(r, 'resumed'), /resumed-rc=[1-9]/);
      }
      assert.equal(flippedStatus?.driver ?? null, flippedStatus?.available ? c.other : null, 'the status follows the changed setting');
      if (!flippedStatus?.available) assert.match(flippedStatus?.reason ?? '', new RegExp(`"${c.other}" chosen in forge\\.sandbox\\.driver`));
      assert.equal((await h.engine.sandboxStatus()).driver, c.driver, 'and follows it back');

      // Gone at the end, with its shims.
      assert.equal(await runtime.state(sandboxOf(ref.name)), 'missing');
      assert.equal(existsSync(path.join(dataDir, 'sandbox-shims', sandboxOf(ref.name))), false);
    });

    it('loop B (network on): host loopback reachable; sandbox removed mid-session → the command fails, the loop reports the loss; orphans of finished loops removed at teardown, a running loop\'s kept; restart gets a new sandbox', async () => {
      h.settings['forge.sandbox.network'] = true;
      const repos = createForgeRepositories(h.engine.db);
      // A killed Forge run left two sandboxes behind: one of a loop the database calls finished
      // (loop A, completed), one of a loop it still calls running (its process died; a forced
      // restart would resume it), which must survive every cleanup.
      const finished = repos.loops.list(h.projectId).find((l) => l.status === 'completed' && l.worktreeDir && existsSync(l.worktreeDir));
      const finishedLoop = finished?.name ?? 'finished-earlier';
      const finishedWorktree = finished?.worktreeDir ?? cacheTempDirIn(dataDir, 'finished-wt');
      const gitCommonDir = path.join(h.repo.dir, '.git');
      repos.loops.reserve(h.projectId, 'ghost-running', { kind: 'goal', status: 'running', sandbox: true });
      const ghostWorktree = cacheTempDirIn(dataDir, 'ghost-wt');
      const leftBehind = testManager(() => true);
      await leftBehind.start(request(finishedLoop, finishedWorktree, gitCommonDir));
      await leftBehind.start(request('ghost-running', ghostWorktree, gitCommonDir));
      testSandboxes.push(sandboxOf(finishedLoop), sandboxOf('ghost-running'));
      assert.equal(await runtime.state(sandboxOf(finishedLoop)), 'running');

      let ref!: LoopRef;
      const removedIdentity: string[] = [];
      const restartedIdentity: string[] = [];
      const script = sessionScript((role, nth) => {
        if (role === 'code' && nth === 1) {
          return steps(
            bash('net-on', `( exec 3<>${hidden(`/dev/tcp/127.0.0.1/${listener.port}`)} && head -c 4 <&3 ); echo " net-rc=$?"`, 60_000),
            async () => {
              removedIdentity.push(await c.identity(sandboxOf(ref.name), dataDir, env));
              await c.removeOutOfBand(sandboxOf(ref.name), dataDir, env);
              return bash('after-removal', 'echo ran > ran-after-removal.txt; echo "after-rc=$?"');
            },
            handoffCoder('the sandbox vanished'),
          );
        }
        if (role === 'auditor') {
          return steps(
            async () => {
              // After the restart: a new sandbox.
              restartedIdentity.push(await c.identity(sandboxOf(ref.name), dataDir, env));
              return bash('restarted', 'echo "restarted host=$(hostname)" > restarted.txt; cat restarted.txt');
            },
            handoffAuditor(true),
          );
        }
        return steps(text('Nothing to do.'));
      });
      h.model.setHandler(script.handler);
      ref = await h.engine.runtime.start({ kind: 'goal', repoPath: h.repo.dir, goal: 'Sandbox loss', name: `loss-${c.driver}-${++attempts}` });
      const wt = worktreeOf(ref);
      const notices: string[] = [];
      const unsubscribe = h.engine.runtime.subscribe((e) => {
        if (e.type === 'loop.notice' && e.loop.name === ref.name) notices.push(e.message);
      });
      let end;
      try {
        end = await endOf(ref);
      } finally {
        unsubscribe();
      }
      assert.deepEqual(script.errors, [], 'host-side checks during the loop');
      const r = script.results;

      // 2. Network on: the host's 127.0.0.1 listener answers.
      assert.match(resultOf(r, 'net-on'), /pong net-rc=0/);
      assert.equal(listener.connections(), 1);

      // 5. Removed out of band: the next command failed clearly and ran nowhere; the loop reported the loss.
      const after = resultOf(r, 'after-removal');
      assert.match(after, /forge: (the )?sandbox .* (is gone|is not usable \(it no longer exists\))/, `the command's failure says the sandbox is gone: ${after}`);
      assert.match(after, /never run on the host|never runs on the host/);
      assert.doesNotMatch(after, /after-rc=/, 'the command did not run');
      assert.equal(existsSync(path.join(wt, 'ran-after-removal.txt')), false, 'nothing ran on the host');
      assert.equal(end.status, 'errored', JSON.stringify(end));
      assert.equal(end.reason.kind, 'worktree_failed');
      const reason = 'message' in end.reason ? end.reason.message : '';
      assert.match(reason, new RegExp(`The sandbox of loop "${ref.name}" is gone: the ${c.driver} sandbox "${sandboxOf(ref.name)}" no longer exists`));
      assert.match(reason, /nothing ran on the host\. Restart the loop to create a new sandbox/);
      assert.ok(notices.some((n) => n === reason), `the loss was reported as a notice too: ${notices.join(' | ')}`);
      assert.equal(script.counts.auditor, 0, 'no phase ran after the loss');
      const last = createForgeRepositories(h.engine.db).transitions.last(h.projectId, ref.name)!;
      assert.equal(last.event, 'sandbox_lost');

      // 4. Teardown removed the finished loop's orphan, kept the running loop's sandbox, and left no shims.
      assert.equal(await runtime.state(sandboxOf(finishedLoop)), 'missing', 'the orphan of a finished loop is removed at teardown');
      assert.equal(await runtime.state(sandboxOf('ghost-running')), 'running', 'a running loop\'s sandbox is never removed');
      assert.equal(existsSync(path.join(dataDir, 'sandbox-shims', sandboxOf(ref.name))), false);

      // The advice holds: a restart gets a new sandbox and the loop goes on to completion.
      await h.engine.runtime.restart(ref);
      const end2 = await endOf(ref);
      assert.equal(end2.status, 'completed', JSON.stringify(end2));
      assert.deepEqual(script.errors, [], 'host-side checks after the restart');
      assert.match(resultOf(r, 'restarted'), /restarted host=forge-sandbox/);
      assert.equal(restartedIdentity.length, 1);
      assert.notEqual(restartedIdentity[0], removedIdentity[0], 'a new sandbox, not the removed one');
      assert.equal(readFileSync(path.join(wt, 'restarted.txt'), 'utf8'), 'restarted host=forge-sandbox\n');
      assert.equal(await runtime.state(sandboxOf(ref.name)), 'missing', 'removed at the end');
      assert.equal(await runtime.state(sandboxOf('ghost-running')), 'running', 'still kept');
      await leftBehind.stop('ghost-running');
      h.settings['forge.sandbox.network'] = false;
    });
  });
}
