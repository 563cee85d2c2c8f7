/**
 * One turn of a read-only agent outside any loop: the architect drafting a plan (`forge plan`),
 * the feature splitter splitting a PRD (`forge group`). Shared by both adapters.
 *
 * Where the agent reads: a detached checkout of the repository's HEAD in Forge's data folder,
 * made for the turn and removed after it. That is the tree loops start from, and opencode
 * writes into the folder it serves (`.opencode/`, `$schema` in config files): serving the
 * user's own working tree would change it. The session lives in opencode's storage, so a later
 * turn can serve the same folder again and prompt the same session.
 *
 * Read-only is enforced, not asked for: the role's session ruleset and the permission
 * responder refuse every shell command, file edit and subagent (permissions.ts), and its Forge
 * tool scope has the fixed role (`architect`: the plan tools; `splitter`: features_write) with
 * `scopeKey` as the key its tools write under.
 */
import { access, mkdir, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { AgentClient, PermissionRule, TokenUsage } from '../opencode/agent-client';
import { addUsage, parseModelRef, ZERO_USAGE } from '../opencode/agent-client';
import type { AgentPrompts } from '../opencode/forge-config';
import type { ForgeToolServer } from '../opencode/forge-tool-server';
import { FORGE_AGENT_NAMES } from '../opencode/forge-tools';
import { startLoopOpencode, type LoopOpencode } from '../opencode/loop-opencode';
import { projectLayerFor, readProjectConfig } from '../opencode/project-config';
import { attachPermissionResponder } from '../opencode/permission-responder';
import type { PlanDraftUsage } from '../storage/repositories';
import type { GitRunner } from '../workspace';

export type ReadOnlyRole = 'architect' | 'splitter';

export interface ReadOnlyTurnLog {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
}

/** What a read-only turn needs of the engine. */
export interface ReadOnlyTurnDeps {
  git: GitRunner;
  log: ReadOnlyTurnLog;
  toolServerFor(projectId: string): Promise<ForgeToolServer>;
  agentPrompts(): Promise<AgentPrompts>;
  opencodeEnv(): NodeJS.ProcessEnv;
  opencodeExtraEnv?: Record<string, string>;
  binaryPath(): string | undefined;
  userDenyRules(): PermissionRule[];
  /** A turn with no model activity for this long is given up (the session is kept). */
  busyStallTimeoutMs(): number;
  /** An idle that comes before the session was seen busy is accepted only after this long. */
  idleGateTimeoutMs(): number;
}

export interface ReadOnlyTurnRequest {
  role: ReadOnlyRole;
  /** Names the opencode server and the log lines: `plan-<id>`, `split-<id>`. */
  label: string;
  project: { projectId: string; repoDir: string; headCommit: string };
  /** Where the checkout of HEAD is made for the turn (removed after it). */
  checkoutDir: string;
  /** The key the role's Forge tools write under (the draft id, the split id). */
  scopeKey: string;
  model: string | null;
  /** A session to prompt again; null: a new one titled `sessionTitle`. */
  sessionId: string | null;
  sessionTitle: string;
  prompt(checkoutDir: string): string;
  /** Called with a new session's id as soon as it exists (so a caller can keep it). */
  onSession?(sessionId: string): void;
  signal?: AbortSignal;
  onProgress?(message: string): void;
}

export interface ReadOnlyTurnResult {
  sessionId: string;
  /** What the session cost so far (null: opencode could not say). */
  usage: PlanDraftUsage | null;
  /** The agent's last message. */
  reply: string;
}

/**
 * The turn could not finish: opencode failed (`opencode`) or the caller interrupted it (`busy`).
 * `sessionId` and `usage` are set when the prompt had been sent.
 */
export class ReadOnlyTurnError extends Error {
  constructor(
    readonly code: 'opencode' | 'busy',
    message: string,
    readonly sessionId: string | null = null,
    readonly usage: PlanDraftUsage | null = null,
  ) {
    super(message);
    this.name = 'ReadOnlyTurnError';
  }
}

const WHO: Record<ReadOnlyRole, string> = { architect: 'The architect', splitter: 'The feature splitter' };
const INTERRUPTED: Record<ReadOnlyRole, string> = { architect: 'Drafting was interrupted; the session is kept.', splitter: 'Splitting was interrupted; nothing was stored.' };

export async function runReadOnlyTurn(deps: ReadOnlyTurnDeps, request: ReadOnlyTurnRequest): Promise<ReadOnlyTurnResult> {
  const { project, checkoutDir, role, label } = request;
  const who = WHO[role];
  const progress = request.onProgress ?? (() => {});
  let opencode: LoopOpencode | undefined;
  let detachPermissions = () => {};
  let sessionId = request.sessionId;
  try {
    progress(`${label}: checking out ${project.headCommit.slice(0, 12)} for the ${role}`);
    await addCheckout(deps.git, project.repoDir, checkoutDir, project.headCommit, role);
    progress('starting opencode');
    const toolServer = await deps.toolServerFor(project.projectId);
    try {
      opencode = await startLoopOpencode({
        loopName: label,
        toolScope: { loopName: null, role, scopeKey: request.scopeKey },
        worktreeDir: checkoutDir,
        toolServer,
        prompts: await deps.agentPrompts(),
        ...(request.model ? { models: { [role]: request.model } } : {}),
        projectLayer: projectLayerFor(await readProjectConfig(project.repoDir)).config,
        userCheckoutDir: project.repoDir,
        binaryPath: deps.binaryPath(),
        baseEnv: deps.opencodeEnv(),
        ...(deps.opencodeExtraEnv ? { extraEnv: deps.opencodeExtraEnv } : {}),
        restart: { maxAttempts: 0 },
        onOutput: (line, stream) => deps.log.debug(`[opencode ${label} ${stream}] ${line}`),
        log: (m) => deps.log.debug(`[opencode ${label}] ${m}`),
      });
    } catch (error) {
      throw new ReadOnlyTurnError('opencode', `opencode could not start: ${(error as Error).message}`);
    }
    const agent = opencode;
    const userDenies = deps.userDenyRules();
    detachPermissions = attachPermissionResponder({
      client: agent.client,
      resolve: (root) => (root === sessionId ? agent.permissionOptions(role, userDenies) : undefined),
      log: (entry) => deps.log.info(`[${label}] permission ${JSON.stringify(entry)}`),
      onError: (e) => deps.log.warn(`[${label}] permission reply failed: ${String(e)}`),
    });
    if (!sessionId) {
      try {
        const created = await agent.client.createSession({
          title: request.sessionTitle,
          agent: FORGE_AGENT_NAMES[role],
          ...(request.model ? { model: parseModelRef(request.model) } : {}),
          permission: agent.permissionRuleset(role, userDenies),
        });
        sessionId = created.id;
      } catch (error) {
        throw new ReadOnlyTurnError('opencode', `opencode could not create the ${role}'s session: ${(error as Error).message}`);
      }
      request.onSession?.(sessionId);
    }
    agent.scope.setActiveSession({ sessionId, role });
    progress(role === 'architect' ? 'the architect is reading the repository and drafting' : 'the feature splitter is reading the PRD and the repository');
    try {
      await promptAndWait(deps, agent.client, sessionId, request.prompt(checkoutDir), { role, who, model: request.model, ...(request.signal ? { signal: request.signal } : {}) });
    } catch (error) {
      const usage = await sessionUsage(deps, agent.client, sessionId);
      const e = error as ReadOnlyTurnError;
      throw new ReadOnlyTurnError(e.code ?? 'opencode', e.message, sessionId, usage);
    }
    return { sessionId, usage: await sessionUsage(deps, agent.client, sessionId), reply: await lastReply(agent.client, sessionId) };
  } finally {
    detachPermissions();
    await opencode?.stop().catch((e) => deps.log.warn(`[${label}] stopping opencode: ${String(e)}`));
    await removeCheckout(deps.git, project.repoDir, checkoutDir).catch((e) => deps.log.warn(`[${label}] removing ${checkoutDir}: ${String(e)}`));
  }
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

async function addCheckout(git: GitRunner, repoDir: string, dir: string, commit: string, role: ReadOnlyRole): Promise<void> {
  await removeCheckout(git, repoDir, dir);
  await mkdir(dirname(dir), { recursive: true });
  const r = await git.run(repoDir, ['worktree', 'add', '--detach', '--force', dir, commit]);
  if (r.exitCode !== 0) throw new ReadOnlyTurnError('opencode', `Forge could not check out ${commit.slice(0, 12)} for the ${role}: ${r.stderr.trim() || r.stdout.trim()}`);
}

async function removeCheckout(git: GitRunner, repoDir: string, dir: string): Promise<void> {
  if (await exists(dir)) {
    const r = await git.run(repoDir, ['worktree', 'remove', '--force', dir]);
    if (r.exitCode !== 0) await rm(dir, { recursive: true, force: true });
  }
  await git.run(repoDir, ['worktree', 'prune']);
}

/** Sends one prompt and waits for the session's idle (or its error, a stall, the caller's abort). */
function promptAndWait(
  deps: ReadOnlyTurnDeps,
  client: AgentClient,
  sessionId: string,
  text: string,
  options: { role: ReadOnlyRole; who: string; model: string | null; signal?: AbortSignal },
): Promise<void> {
  const { signal, who } = options;
  return new Promise<void>((resolvePromise, reject) => {
    const sentAt = Date.now();
    let seenBusy = false;
    let lastActivity = Date.now();
    let done = false;
    const finish = (error?: Error) => {
      if (done) return;
      done = true;
      unsubscribe();
      clearInterval(watchdog);
      signal?.removeEventListener('abort', onAbort);
      client.unwatchSession(sessionId);
      if (error) reject(error);
      else resolvePromise();
    };
    const onAbort = () => {
      void client.abort(sessionId).catch(() => {});
      finish(new ReadOnlyTurnError('busy', INTERRUPTED[options.role]));
    };
    const unsubscribe = client.subscribe((event) => {
      if (event.type === 'activity' && event.rootSessionId === sessionId) lastActivity = Date.now();
      else if (event.type === 'session.busy' && event.sessionId === sessionId) seenBusy = true;
      else if (event.type === 'session.idle' && event.sessionId === sessionId) {
        if (seenBusy || Date.now() - sentAt >= deps.idleGateTimeoutMs()) finish();
      } else if (event.type === 'session.error' && event.sessionId === sessionId && event.error.name !== 'MessageAbortedError') {
        finish(new ReadOnlyTurnError('opencode', `${who}'s model failed: ${event.error.message.split('\n')[0]}`));
      } else if (event.type === 'stream.lost') {
        finish(new ReadOnlyTurnError('opencode', `opencode stopped answering: ${event.error}`));
      }
    });
    const watchdog = setInterval(() => {
      if (Date.now() - lastActivity > deps.busyStallTimeoutMs()) {
        void client.abort(sessionId).catch(() => {});
        finish(new ReadOnlyTurnError('opencode', `${who} showed no activity for ${Math.round(deps.busyStallTimeoutMs() / 1000)} s; Forge stopped waiting (the session is kept).`));
      }
    }, 1000);
    watchdog.unref?.();
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort);
    client.watchSession(sessionId);
    client
      .promptAsync({ sessionId, text, agent: FORGE_AGENT_NAMES[options.role], ...(options.model ? { model: parseModelRef(options.model) } : {}) })
      .catch((error: unknown) => finish(new ReadOnlyTurnError('opencode', `The prompt could not be sent to opencode: ${(error as Error).message}`)));
  });
}

async function sessionUsage(deps: ReadOnlyTurnDeps, client: AgentClient, sessionId: string): Promise<PlanDraftUsage | null> {
  try {
    let usage: TokenUsage = ZERO_USAGE;
    let cost = 0;
    let messages = 0;
    for (const u of await client.usage(sessionId)) {
      usage = addUsage(usage, u.usage);
      cost += u.cost;
      messages += u.messages;
    }
    return { inputTokens: usage.input, outputTokens: usage.output, reasoningTokens: usage.reasoning, cacheReadTokens: usage.cacheRead, cacheWriteTokens: usage.cacheWrite, cost, messages };
  } catch (error) {
    deps.log.warn(`[session ${sessionId}] usage unavailable: ${String(error)}`);
    return null;
  }
}

async function lastReply(client: AgentClient, sessionId: string): Promise<string> {
  try {
    const messages = await client.messages(sessionId);
    const last = [...messages].reverse().find((m) => m.role === 'assistant' && m.text.trim());
    return last?.text.trim() ?? '';
  } catch {
    return '';
  }
}
