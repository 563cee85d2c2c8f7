import * as os from 'node:os';
import * as path from 'node:path';
import * as vscode from 'vscode';
import type { ForgeEngine } from './engine-contract';
import type { EngineEndpoint, HandOverOutcome, StartOrRestart } from '../core/engine-host';
import type { CoreModule } from './core-loader';
import type { ForgeLog } from './log';
import type { SettingsAccessor } from './settings-accessor';

/**
 * Owns the one engine of this window, created on the first use of a Forge feature (a
 * command, the Loop Explorer becoming visible, the dashboard) and closed with the extension.
 * Activation never creates it: no database is opened and no process started until then.
 */
export interface EngineHost {
  /** The engine, created on first call. */
  get(): Promise<ForgeEngine>;
  /** The engine if it exists already (views use this to avoid creating it). */
  peek(): ForgeEngine | undefined;
  readonly onDidStart: vscode.Event<ForgeEngine>;
  /**
   * Extra environment for the engine (tests: isolated HOME/XDG for opencode and
   * FORGE_DATA_DIR). Closes a running engine so that the next use picks it up.
   */
  setExtraEnvironment(env: Record<string, string>): Promise<void>;
  /**
   * One engine per data folder: offers a loop this window is about to start or restart to the
   * data folder's engine when another live process is it (and sharing is on). 'handed': that
   * process supervises the loop (the connection is closed again: the loop does not depend on it);
   * 'supervise': the window starts it itself. Throws what the engine's runtime refused.
   */
  handOver(message: HandOverMessage): Promise<Exclude<HandOverOutcome, { action: 'fail' }>>;
  /** Sets (or, with undefined, removes) a variable of opencode's environment for processes started from now on. */
  setOpencodeVariable(name: string, value: string | undefined): void;
  dispose(): Promise<void>;
}

/** A start or restart as the window would run it (the compatibility key is the host's to add). */
export type HandOverMessage = Omit<Extract<StartOrRestart, { type: 'start' }>, 'compat' | 'follow'> | Omit<Extract<StartOrRestart, { type: 'restart' }>, 'compat' | 'follow'>;

export interface EngineHostDeps {
  loadCore: () => Promise<CoreModule>;
  settings: SettingsAccessor;
  log: ForgeLog;
  /** Folder with sql-wasm.wasm and agents/*.md: the extension's dist/. */
  assetsDir: string;
  /** Folder with the sandbox Dockerfile. */
  containerDir: string;
  /** Environment variables holding the user's provider API keys (from SecretStorage). */
  apiKeyEnv: () => Promise<Record<string, string>>;
  /** Shows the user a message (the extension's notifier, which records it). */
  notify?: (message: string) => void;
}

/** `forge.dataDir` as an absolute path (`~/` expanded), or undefined when not set. */
export function dataDirFromSetting(value: string): string | undefined {
  const trimmed = value.trim();
  if (trimmed === '') return undefined;
  const expanded = trimmed === '~' || trimmed.startsWith('~/') ? path.join(os.homedir(), trimmed.slice(1)) : trimmed;
  if (!path.isAbsolute(expanded)) {
    throw new Error(vscode.l10n.t('The setting forge.dataDir is "{0}", a relative path. Set it to an absolute folder (or clear it to use the default).', value));
  }
  return path.resolve(expanded);
}

export function createEngineHost(deps: EngineHostDeps): EngineHost {
  const started = new vscode.EventEmitter<ForgeEngine>();
  let engine: ForgeEngine | undefined;
  let creating: Promise<ForgeEngine> | undefined;
  let extraEnv: Record<string, string> = {};
  // One engine per data folder: once this window starts a loop it is the data folder's engine
  // (unless another process already is), and \`forge run\`s in that folder hand their loops to it.
  let endpoint: Promise<EngineEndpoint | null> | undefined;
  // One object for the engine's lifetime: the engine copies it for each opencode process it
  // starts, so a key set later reaches the next process without restarting the engine.
  const opencodeEnv: NodeJS.ProcessEnv = {};
  const log = deps.log;

  /** What the engine's start removed after a killed Forge process: each thing logged, one notification for all of it. */
  function reportCrashCleanup(report: ForgeEngine['crashCleanup']): void {
    for (const r of report.removed) log.info(`cleaned up after a killed or crashed Forge process: removed ${r}`);
    for (const p of report.problems) log.warn(`clean-up after a crash: ${p}`);
    if (report.removed.length === 0) return;
    const message = vscode.l10n.t('Forge cleaned up after a Forge process that was killed or crashed: it removed {0} leftover(s) (merge worktrees, sandboxes, cgroups, job records). The Forge output channel lists them.', report.removed.length);
    if (deps.notify) deps.notify(message);
    else void vscode.window.showInformationMessage(message);
  }

  async function create(): Promise<ForgeEngine> {
    const core = await deps.loadCore();
    const settings = await deps.settings.load();
    const hostEnv = { ...process.env, ...extraEnv };
    const dataDir = dataDirFromSetting(settings['forge.dataDir']) ?? core.resolveDataDir(hostEnv);
    for (const key of Object.keys(opencodeEnv)) delete opencodeEnv[key];
    Object.assign(opencodeEnv, process.env, await deps.apiKeyEnv());
    log.info(`starting the engine (data folder ${dataDir})`);
    const created = await core.createForgeEngine({
      dataDir,
      settings: () => deps.settings.get(),
      log: deps.log.child('engine'),
      assetsDir: deps.assetsDir,
      containerDir: deps.containerDir,
      env: opencodeEnv,
      // No model configured anywhere: Forge's embedded scripted model, so a loop still runs (and says so).
      embeddedModel: core.startEmbeddedModel,
      ...(Object.keys(extraEnv).length > 0 ? { opencodeExtraEnv: { ...extraEnv } } : {}),
      hostKind: 'vscode',
    });
    reportCrashCleanup(created.crashCleanup);
    // Tried at each start of a loop of this window until it listens: a window that found another
    // process being the engine (or could not listen) becomes it at a later start once that process
    // has gone, rather than never.
    const listenOnce = () => {
      if (endpoint || !deps.settings.get()['forge.engine.shareProcess']) return;
      const attempt: Promise<EngineEndpoint | null> = core
        .becomeEngine({
          dataDir,
          kind: 'vscode',
          supervisorId: created.supervisorId,
          runtime: created.runtime,
          live: created.live,
          // Read at each request: the window's settings can change while it is the engine.
          compat: () => compatKey(core),
          log: deps.log.child('engine'),
          onHandedOver: (ref, pid) => log.info(`supervising loop ${ref.name}, handed over by process ${pid}`),
        })
        .then(
          (ep) => {
            log.info(ep ? `this window is the data folder's engine (${dataDir}/engine)` : 'another Forge process is the data folder\'s engine; this window tries again at its next loop');
            return ep;
          },
          (error: unknown) => {
            log.warn(`this window cannot be the data folder's engine (it tries again at its next loop): ${String(error)}`);
            return null;
          },
        )
        .then((ep) => {
          if (!ep && endpoint === attempt) endpoint = undefined;
          return ep;
        });
      endpoint = attempt;
    };
    created.runtime.subscribe((e) => {
      if (e.type === 'loop.started' || (e.type === 'loop.phase' && e.event === 'restart')) listenOnce();
    });
    engine = created;
    started.fire(created);
    return created;
  }

  /** What a loop of this window runs with: a process with other settings or credentials keeps its loop (both ways). */
  function compatKey(core: CoreModule): string {
    return core.compatibilityKey(deps.settings.get(), { ...opencodeEnv, ...extraEnv });
  }

  async function handOver(message: HandOverMessage): Promise<Exclude<HandOverOutcome, { action: 'fail' }>> {
    const core = await deps.loadCore();
    const current = await getEngine();
    const selfIsEngine = (await endpoint) != null;
    const plan = core.planHandOver({ shareProcess: deps.settings.get()['forge.engine.shareProcess'], selfIsEngine });
    if (plan.action === 'supervise') return plan;
    const conn = await core.connectToEngine(current.dataDir);
    let outcome: HandOverOutcome;
    try {
      outcome = core.judgeHandOverAnswer(conn ? await conn.request({ ...message, follow: false, compat: compatKey(core) }) : null, conn?.engine ?? null);
    } finally {
      // The loop's events reach the window through the database (the store watcher), as any other
      // process's loop does: no connection stays open per loop, and the engine ends none when it closes.
      conn?.close();
    }
    if (outcome.action === 'fail') throw new Error(outcome.message);
    if (outcome.action === 'supervise' && outcome.detail) log.info(`the data folder's engine declined the loop (${outcome.detail}); this window supervises it`);
    return outcome;
  }

  /** Loops handed to this window end with it (shutdown, as its own do); then the socket goes. */
  async function closeEngine(current: ForgeEngine): Promise<void> {
    const ep = await endpoint;
    endpoint = undefined;
    ep?.stopAccepting();
    try {
      await current.close();
    } finally {
      await ep?.close().catch((e: unknown) => log.warn(`closing the engine endpoint: ${String(e)}`));
    }
  }

  function getEngine(): Promise<ForgeEngine> {
    if (engine) return Promise.resolve(engine);
    creating ??= create().finally(() => {
      creating = undefined;
    });
    return creating;
  }

  return {
    get: getEngine,
    peek: () => engine,
    onDidStart: started.event,
    async setExtraEnvironment(env) {
      extraEnv = { ...env };
      const current = engine ?? (await creating?.catch(() => undefined));
      if (current) {
        engine = undefined;
        await closeEngine(current);
      }
    },
    handOver,
    setOpencodeVariable(name, value) {
      if (value === undefined) delete opencodeEnv[name];
      else opencodeEnv[name] = value;
    },
    async dispose() {
      started.dispose();
      const current = engine ?? (await creating?.catch(() => undefined));
      engine = undefined;
      if (current) await closeEngine(current);
    },
  };
}
