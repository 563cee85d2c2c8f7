/**
 * Opens a loop's agent side: its sandbox or agent shell, its opencode server (one of its own, or
 * its place on the server shared by this process's loops), its forge_shell jobs and its
 * shell-hang watchdog — all tied to one lifetime, ended by the loop scope's `stop()`.
 *
 * Split out of runtime.ts (which starts, cancels and restarts loops) along the seam between
 * deciding what a loop does and wiring what it runs on.
 */
import { dirname, join } from 'node:path';
import { startLoopOpencode, type LoopOpencode } from '../opencode/loop-opencode';
import { parseJsonObject } from '../opencode/server-process';
import { disabledPluginNotice, projectLayerFor, readProjectConfig } from '../opencode/project-config';
import type { SharedOpencodePool, SharedServerConfinement } from '../opencode/shared-opencode';
import type { ForgeRepositories, LoopRow } from '../storage/repositories';
import { LoopJobs } from '../jobs/loop-jobs';
import { effectiveStallMs, ShellWatchdog } from '../jobs/shell-watchdog';
import { readExtras, type StoredLoopExtras } from './loop-supervisor';
import { LoopRuntimeError, type LoopRuntimeEvent } from './runtime-types';
import type { LoopRuntimeDeps, PreparedAgentShell } from './runtime';
import { stepTimer } from './step-timer';

/** What a loop's server needs besides the loop's own shell: the loop's shell, ripgrep shim and sandbox name go to the shared server's router instead. */
export function sharedServerParts(prepared: PreparedAgentShell): { env: Record<string, string>; config: Record<string, unknown> } {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(prepared.env)) {
    if (key === 'SHELL' || key === 'FORGE_SANDBOX_NAME' || (key === 'PATH' && prepared.ripgrepPath)) continue;
    env[key] = value;
  }
  const { shell: _shell, ...config } = prepared.config;
  void _shell;
  return { env, config };
}

export function createLoopAgentOpener(deps: LoopRuntimeDeps, repos: ForgeRepositories, emit: (event: LoopRuntimeEvent) => void) {
  return function openAgentFor(projectId: string) {
    return async (loop: LoopRow, extras: StoredLoopExtras): Promise<LoopOpencode> => {
      const settings = deps.settings();
      const timing = stepTimer();
      const toolServer = await deps.toolServerFor(projectId, () => {});
      timing.mark('tool server');
      const models = [loop.model, loop.auditorModel, ...extras.limits.auditorFallbackModels].filter((m): m is string => !!m);
      await deps.prepareModels?.(models);
      timing.mark('models');
      let prepared: PreparedAgentShell | undefined;
      if (loop.sandbox) {
        if (!deps.sandbox) throw new LoopRuntimeError('sandbox', 'This loop runs sandboxed, but no sandbox driver is configured in this Forge.');
        prepared = await deps.sandbox.prepare(loop, extras, loop.iteration > 1 || (readExtras(loop).loopState.phase !== 'coding'));
      } else if (deps.sandbox) {
        // Unconfined: still no secret in the agent's environment and no push through git.
        prepared = await deps.sandbox.prepareHost(loop);
      }
      timing.mark(loop.sandbox ? 'sandbox' : 'agent shell');
      const attach = settings['forge.opencode.serverUrl'] ? ({ url: settings['forge.opencode.serverUrl'] } as never) : undefined;
      const pool: SharedOpencodePool | undefined = !attach && settings['forge.opencode.serverMode'] === 'shared' ? deps.sharedOpencode : undefined;
      const confinement: SharedServerConfinement = loop.sandbox ? 'sandboxed' : prepared ? 'host' : 'plain';
      // A shared server's shell is its router; the loop's own shell is the router's target.
      const serverParts = prepared ? (pool ? sharedServerParts(prepared) : { env: prepared.env, config: prepared.config }) : { env: {}, config: {} };
      const baseEnv = { ...deps.opencodeEnv() };
      // Forge's file tool guard is an opencode plugin: "no external plugins" would turn it off.
      if (deps.fileGuard && !attach) delete baseEnv.OPENCODE_PURE;
      if (Object.keys(serverParts.config).length > 0) {
        const inline = parseJsonObject(baseEnv.OPENCODE_CONFIG_CONTENT) ?? {};
        baseEnv.OPENCODE_CONFIG_CONTENT = JSON.stringify({ ...inline, ...serverParts.config });
      }
      // The user's checkout, not the worktree: read as data, only its model and provider settings.
      const projectLayer = loop.repoDir ? projectLayerFor(await readProjectConfig(loop.repoDir)).config : undefined;
      const agent = await startLoopOpencode({
        loopName: loop.name,
        worktreeDir: loop.worktreeDir!,
        toolServer,
        prompts: await deps.agentPrompts(),
        models: { code: loop.model ?? undefined, auditor: loop.auditorModel ?? loop.model ?? undefined },
        ...(projectLayer ? { projectLayer } : {}),
        ...(loop.repoDir ? { userCheckoutDir: loop.repoDir } : {}),
        onDisabledPluginCode: (names) => {
          deps.log.warn(`[loop ${loop.name}] ${disabledPluginNotice(names)}`);
          emit({ type: 'loop.notice', loop: { projectId, name: loop.name }, level: 'warning', message: disabledPluginNotice(names) });
        },
        binaryPath: settings['forge.opencode.binaryPath'] || undefined,
        attach,
        baseEnv,
        extraEnv: { ...serverParts.env, ...(deps.opencodeExtraEnv ?? {}) },
        ...(pool
          ? { shared: { pool, confinement, ...(prepared ? { shell: { shellPath: prepared.shellPath, ...(prepared.ripgrepPath ? { ripgrepPath: prepared.ripgrepPath } : {}) } } : {}) } }
          : {}),
        ...(deps.fileGuard && !attach ? { fileGuard: { server: await deps.fileGuard(), ...(prepared?.freeze ? { freeze: prepared.freeze } : {}) } } : {}),
        onOutput: (line, stream) => deps.log.debug(`[opencode ${loop.name} ${stream}] ${line}`),
        log: (m) => deps.log.debug(`[opencode ${loop.name}] ${m}`),
      });
      timing.mark('opencode');
      deps.log.debug(`[loop ${loop.name}] agent opened: ${timing.summary()}`);
      return withShellSupervision(projectId, loop, agent, prepared?.shellPath, prepared?.callsDir, { ...baseEnv, ...(prepared?.env ?? {}) });
    };
  };

  /**
   * The loop's forge_shell jobs and its shell-hang watchdog, tied to its opencode's lifetime:
   * the loop's scope stops its opencode when the loop ends (completed, cancelled, failed) or
   * another process takes over, and that kills its jobs first.
   */
  function withShellSupervision(projectId: string, loop: LoopRow, agent: LoopOpencode, shellPath: string | undefined, callsDir: string | undefined, env: NodeJS.ProcessEnv): LoopOpencode {
    const settings = deps.settings();
    const shellDir = callsDir ? dirname(callsDir) : undefined;
    const jobs = shellPath && shellDir && deps.jobs
      ? new LoopJobs({ loopName: loop.name, shellPath, cwd: loop.worktreeDir!, logDir: join(shellDir, 'jobs'), baseEnv: env, log: (m) => deps.log.info(m) })
      : undefined;
    if (jobs) deps.jobs!.set(projectId, loop.name, jobs);
    const mode = settings['forge.watchdog.mode'];
    const watchdog = callsDir && mode !== 'off'
      ? new ShellWatchdog({
          loopName: loop.name,
          callsDir,
          mode,
          stallMs: effectiveStallMs(settings['forge.watchdog.stallMs'], deps.shellWatchdogFloorMs),
          record: (row) => repos.shellInterventions.append(projectId, row),
          notice: (level, message) => emit({ type: 'loop.notice', loop: { projectId, name: loop.name }, level, message }),
          log: (m) => deps.log.warn(`[loop ${loop.name}] ${m}`),
        })
      : undefined;
    const unsubscribe = watchdog ? agent.client.subscribe((e) => watchdog.observe(e)) : () => {};
    const stopAgent = agent.stop.bind(agent);
    return {
      ...agent,
      async stop() {
        unsubscribe();
        watchdog?.dispose();
        if (jobs) {
          await jobs.dispose().catch((e) => deps.log.warn(`[loop ${loop.name}] stopping its jobs: ${String(e)}`));
          deps.jobs!.delete(projectId, loop.name, jobs);
        }
        await stopAgent();
      },
    };
  }
}
