/**
 * Plan authoring (issue 15), the adapter: one architect turn in a kept opencode session.
 *
 * Where the architect reads: a detached checkout of the repository's HEAD in Forge's data
 * folder (`<dataDir>/plan-drafts/<id>`), made for the turn and removed after it. That is the
 * tree a loop running the plan starts from, and opencode writes into the folder it serves
 * (`.opencode/`, `$schema` in config files): serving the user's own working tree would change
 * it. The session lives in opencode's storage, so `--continue` serves the same folder again and
 * prompts the same session.
 *
 * Read-only is enforced, not asked for: the architect's session ruleset and the permission
 * responder refuse every shell command, file edit and subagent (permissions.ts), and its Forge
 * tool scope has the fixed role `architect` (plan_read / plan_write / plan_edit only) with the
 * draft id as the plan's key in the `plans` table.
 */
import { randomBytes } from 'node:crypto';
import { access, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { AgentClient, PermissionRule, TokenUsage } from '../opencode/agent-client';
import { addUsage, parseModelRef, ZERO_USAGE } from '../opencode/agent-client';
import type { AgentPrompts } from '../opencode/forge-config';
import type { ForgeToolServer } from '../opencode/forge-tool-server';
import { FORGE_AGENT_NAMES } from '../opencode/forge-tools';
import { startLoopOpencode, type LoopOpencode } from '../opencode/loop-opencode';
import { attachPermissionResponder } from '../opencode/permission-responder';
import type { ForgeRepositories, PlanDraftRow, PlanDraftUsage } from '../storage/repositories';
import type { GitRunner } from '../workspace';
import {
  architectSessionTitle,
  buildArchitectFollowUp,
  buildArchitectPrompt,
  checkDraftRequest,
  draftFileName,
  draftOutcome,
  PlanDraftError,
  type DraftOutcome,
} from './architect-prompt';

export interface PlanDrafterLog {
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
}

export interface PlanDrafterDeps {
  dataDir: string;
  repos: ForgeRepositories;
  git: GitRunner;
  log: PlanDrafterLog;
  /** The project of a folder inside a git repository (fails clearly when it is none). */
  projectOf(repoPath: string): Promise<{ projectId: string; repoDir: string; headCommit: string }>;
  toolServerFor(projectId: string): Promise<ForgeToolServer>;
  agentPrompts(): Promise<AgentPrompts>;
  /** The architect's model: the requested one, else the configured one; null lets opencode choose the user's default. */
  resolveModel(requested: string | null): Promise<string | null>;
  opencodeEnv(): NodeJS.ProcessEnv;
  opencodeExtraEnv?: Record<string, string>;
  binaryPath(): string | undefined;
  userDenyRules(): PermissionRule[];
  /** A turn with no model activity for this long is given up (the session is kept). */
  busyStallTimeoutMs(): number;
  /** An idle that comes before the session was seen busy is accepted only after this long. */
  idleGateTimeoutMs(): number;
}

export interface DraftRequest {
  repoPath: string;
  request: string;
  model?: string | null;
  /** File to write the plan to; default `<outDir>/forge-plan-<id>.md`. Refused when it exists. */
  outPath?: string | null;
  /** Folder for the default file name; default `<dataDir>/plans`. */
  outDir?: string | null;
  signal?: AbortSignal;
  onProgress?: (message: string) => void;
}

export interface ContinueDraftRequest {
  repoPath: string;
  id: string;
  answer: string;
  signal?: AbortSignal;
  onProgress?: (message: string) => void;
}

export interface DraftResult {
  draft: PlanDraftRow;
  outcome: DraftOutcome;
  /** The plan as stored (and written to `draft.outPath`), null when there is none. */
  plan: string | null;
  /** The architect's last message: its questions, or what it did. */
  reply: string;
}

export interface PlanDrafter {
  draft(request: DraftRequest): Promise<DraftResult>;
  continue(request: ContinueDraftRequest): Promise<DraftResult>;
  get(repoPath: string, id: string): Promise<PlanDraftRow | undefined>;
}

const DRAFT_ID_RE = /^[a-z0-9]{6,16}$/;

export function createPlanDrafter(deps: PlanDrafterDeps): PlanDrafter {
  const checkoutDirFor = (id: string) => join(deps.dataDir, 'plan-drafts', id);

  async function exists(path: string): Promise<boolean> {
    return access(path).then(
      () => true,
      () => false,
    );
  }

  async function addCheckout(repoDir: string, dir: string, commit: string): Promise<void> {
    await removeCheckout(repoDir, dir);
    await mkdir(dirname(dir), { recursive: true });
    const r = await deps.git.run(repoDir, ['worktree', 'add', '--detach', '--force', dir, commit]);
    if (r.exitCode !== 0) throw new PlanDraftError('opencode', `Forge could not check out ${commit.slice(0, 12)} for the architect: ${r.stderr.trim() || r.stdout.trim()}`);
  }

  async function removeCheckout(repoDir: string, dir: string): Promise<void> {
    if (await exists(dir)) {
      const r = await deps.git.run(repoDir, ['worktree', 'remove', '--force', dir]);
      if (r.exitCode !== 0) await rm(dir, { recursive: true, force: true });
    }
    await deps.git.run(repoDir, ['worktree', 'prune']);
  }

  /** Sends one prompt and waits for the session's idle (or its error, a stall, the caller's abort). */
  function promptAndWait(client: AgentClient, sessionId: string, text: string, model: string | null, signal?: AbortSignal): Promise<void> {
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
        finish(new PlanDraftError('busy', 'Drafting was interrupted; the session is kept.'));
      };
      const unsubscribe = client.subscribe((event) => {
        if (event.type === 'activity' && event.rootSessionId === sessionId) lastActivity = Date.now();
        else if (event.type === 'session.busy' && event.sessionId === sessionId) seenBusy = true;
        else if (event.type === 'session.idle' && event.sessionId === sessionId) {
          if (seenBusy || Date.now() - sentAt >= deps.idleGateTimeoutMs()) finish();
        } else if (event.type === 'session.error' && event.sessionId === sessionId && event.error.name !== 'MessageAbortedError') {
          finish(new PlanDraftError('opencode', `The architect's model failed: ${event.error.message.split('\n')[0]}`));
        } else if (event.type === 'stream.lost') {
          finish(new PlanDraftError('opencode', `opencode stopped answering: ${event.error}`));
        }
      });
      const watchdog = setInterval(() => {
        if (Date.now() - lastActivity > deps.busyStallTimeoutMs()) {
          void client.abort(sessionId).catch(() => {});
          finish(new PlanDraftError('opencode', `The architect showed no activity for ${Math.round(deps.busyStallTimeoutMs() / 1000)} s; Forge stopped waiting (the session is kept).`));
        }
      }, 1000);
      watchdog.unref?.();
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort);
      client.watchSession(sessionId);
      client
        .promptAsync({ sessionId, text, agent: FORGE_AGENT_NAMES.architect, ...(model ? { model: parseModelRef(model) } : {}) })
        .catch((error: unknown) => finish(new PlanDraftError('opencode', `The prompt could not be sent to opencode: ${(error as Error).message}`)));
    });
  }

  async function sessionUsage(client: AgentClient, sessionId: string): Promise<PlanDraftUsage | null> {
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
      deps.log.warn(`[plan ${sessionId}] usage unavailable: ${String(error)}`);
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

  /** Writes the plan file whole or not at all (a temporary file renamed over it). */
  async function writePlanFile(path: string, content: string): Promise<void> {
    await mkdir(dirname(path), { recursive: true });
    const temporary = `${path}.${process.pid}.tmp`;
    await writeFile(temporary, content.endsWith('\n') ? content : `${content}\n`);
    await rename(temporary, path);
  }

  async function runTurn(draft: PlanDraftRow, project: { projectId: string; repoDir: string; headCommit: string }, text: (checkoutDir: string) => string, options: { signal?: AbortSignal; onProgress?: (m: string) => void; continued: boolean }): Promise<DraftResult> {
    const { projectId } = project;
    const checkoutDir = checkoutDirFor(draft.id);
    const progress = options.onProgress ?? (() => {});
    const planBefore = deps.repos.plans.get(projectId, draft.id);
    let opencode: LoopOpencode | undefined;
    let detachPermissions = () => {};
    let sessionId = draft.sessionId;
    try {
      progress(`draft ${draft.id}: checking out ${project.headCommit.slice(0, 12)} for the architect`);
      await addCheckout(project.repoDir, checkoutDir, project.headCommit);
      progress('starting opencode');
      const toolServer = await deps.toolServerFor(projectId);
      try {
        opencode = await startLoopOpencode({
          loopName: `plan-${draft.id}`,
          toolScope: { loopName: null, role: 'architect', scopeKey: draft.id },
          worktreeDir: checkoutDir,
          toolServer,
          prompts: await deps.agentPrompts(),
          ...(draft.model ? { models: { architect: draft.model } } : {}),
          binaryPath: deps.binaryPath(),
          baseEnv: deps.opencodeEnv(),
          ...(deps.opencodeExtraEnv ? { extraEnv: deps.opencodeExtraEnv } : {}),
          restart: { maxAttempts: 0 },
          onOutput: (line, stream) => deps.log.debug(`[opencode plan-${draft.id} ${stream}] ${line}`),
          log: (m) => deps.log.debug(`[opencode plan-${draft.id}] ${m}`),
        });
      } catch (error) {
        throw new PlanDraftError('opencode', `opencode could not start: ${(error as Error).message}`);
      }
      const agent = opencode;
      const userDenies = deps.userDenyRules();
      detachPermissions = attachPermissionResponder({
        client: agent.client,
        resolve: (root) => (root === sessionId ? agent.permissionOptions('architect', userDenies) : undefined),
        log: (entry) => deps.log.info(`[plan ${draft.id}] permission ${JSON.stringify(entry)}`),
        onError: (e) => deps.log.warn(`[plan ${draft.id}] permission reply failed: ${String(e)}`),
      });
      if (!sessionId) {
        try {
          const created = await agent.client.createSession({
            title: architectSessionTitle(draft.request),
            agent: FORGE_AGENT_NAMES.architect,
            ...(draft.model ? { model: parseModelRef(draft.model) } : {}),
            permission: agent.permissionRuleset('architect', userDenies),
          });
          sessionId = created.id;
        } catch (error) {
          throw new PlanDraftError('opencode', `opencode could not create the architect's session: ${(error as Error).message}`);
        }
        deps.repos.planDrafts.update(projectId, draft.id, { sessionId });
      }
      agent.scope.setActiveSession({ sessionId, role: 'architect' });
      progress('the architect is reading the repository and drafting');
      const turnPrompt = text(checkoutDir);
      try {
        await promptAndWait(agent.client, sessionId, turnPrompt, draft.model, options.signal);
      } catch (error) {
        const status = error instanceof PlanDraftError && error.code === 'busy' ? 'interrupted' : 'failed';
        const usage = await sessionUsage(agent.client, sessionId);
        deps.repos.planDrafts.update(projectId, draft.id, { status, turns: draft.turns + 1, ...(usage ? { usage } : {}) });
        throw error;
      }
      const usage = await sessionUsage(agent.client, sessionId);
      const reply = await lastReply(agent.client, sessionId);
      const stored = deps.repos.plans.get(projectId, draft.id);
      const outcome = draftOutcome({
        plan: stored?.content ?? null,
        planChangedThisTurn: !!stored && (!planBefore || stored.updatedAt !== planBefore.updatedAt || stored.content !== planBefore.content),
        draftId: draft.id,
        continued: options.continued,
      });
      if (stored) await writePlanFile(draft.outPath, stored.content);
      const updated = deps.repos.planDrafts.update(projectId, draft.id, {
        status: outcome.kind === 'drafted' ? 'drafted' : 'no_plan',
        turns: draft.turns + 1,
        lastReply: reply || null,
        ...(usage ? { usage } : {}),
      });
      return { draft: updated, outcome, plan: stored?.content ?? null, reply };
    } catch (error) {
      // A turn that failed before its prompt (checkout, opencode, session) leaves no draft "drafting".
      if (deps.repos.planDrafts.get(projectId, draft.id)?.status === 'drafting') deps.repos.planDrafts.update(projectId, draft.id, { status: 'failed' });
      throw error;
    } finally {
      detachPermissions();
      await opencode?.stop().catch((e) => deps.log.warn(`[plan ${draft.id}] stopping opencode: ${String(e)}`));
      await removeCheckout(project.repoDir, checkoutDir).catch((e) => deps.log.warn(`[plan ${draft.id}] removing ${checkoutDir}: ${String(e)}`));
    }
  }

  async function draftOf(repoPath: string, id: string): Promise<{ draft: PlanDraftRow; project: { projectId: string; repoDir: string; headCommit: string } }> {
    const trimmed = id.trim();
    if (!DRAFT_ID_RE.test(trimmed)) throw new PlanDraftError('not_found', `"${id}" is not a plan draft id (forge plan prints it, e.g. "draft 3f9a2c1b").`);
    const project = await deps.projectOf(repoPath);
    const draft = deps.repos.planDrafts.get(project.projectId, trimmed);
    if (!draft) {
      const elsewhere = deps.repos.planDrafts.findById(trimmed);
      throw new PlanDraftError(
        'not_found',
        elsewhere
          ? `Plan draft ${trimmed} belongs to the repository ${elsewhere.repoDir}, not ${project.repoDir}. Run it there (--repo ${elsewhere.repoDir}).`
          : `No plan draft ${trimmed} in this repository. Start one with forge plan "what you want".`,
      );
    }
    return { draft, project };
  }

  return {
    async draft(request) {
      const text = checkDraftRequest(request.request);
      const project = await deps.projectOf(request.repoPath);
      const model = await deps.resolveModel(request.model ?? null);
      const id = randomBytes(4).toString('hex');
      const outPath = resolve(request.outPath ?? join(request.outDir ?? join(deps.dataDir, 'plans'), draftFileName(id)));
      if (request.outPath && (await exists(outPath))) {
        throw new PlanDraftError('out_exists', `${outPath} exists already; Forge does not overwrite it. Give another --out, or remove the file.`);
      }
      const draft = deps.repos.planDrafts.create(project.projectId, { id, repoDir: project.repoDir, request: text, model, outPath });
      return runTurn(draft, project, (checkoutDir) => buildArchitectPrompt({ request: text, checkoutDir, headCommit: project.headCommit }), {
        continued: false,
        ...(request.signal ? { signal: request.signal } : {}),
        ...(request.onProgress ? { onProgress: request.onProgress } : {}),
      });
    },

    async continue(request) {
      const answer = checkDraftRequest(request.answer, 'answer');
      const { draft, project } = await draftOf(request.repoPath, request.id);
      if (!draft.sessionId) {
        throw new PlanDraftError('not_found', `Plan draft ${draft.id} has no architect session (opencode could not create one). Start again with forge plan "${draft.request.slice(0, 60)}".`);
      }
      // The user's edits of the plan file become the plan of record the architect continues from.
      const stored = deps.repos.plans.get(project.projectId, draft.id);
      const onDisk = await readFile(draft.outPath, 'utf8').catch(() => null);
      const userEditedPlan = onDisk !== null && onDisk.trim() !== '' && onDisk.trimEnd() !== (stored?.content ?? '').trimEnd();
      if (userEditedPlan) deps.repos.plans.put(project.projectId, draft.id, onDisk!);
      return runTurn(draft, project, () => buildArchitectFollowUp({ answer, userEditedPlan }), {
        continued: true,
        ...(request.signal ? { signal: request.signal } : {}),
        ...(request.onProgress ? { onProgress: request.onProgress } : {}),
      });
    },

    async get(repoPath, id) {
      const project = await deps.projectOf(repoPath);
      return deps.repos.planDrafts.get(project.projectId, id.trim());
    },
  };
}
