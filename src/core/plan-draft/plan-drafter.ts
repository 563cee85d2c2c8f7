/**
 * Plan authoring (issue 15), the adapter: one architect turn in a kept opencode session.
 *
 * The turn itself is `runReadOnlyTurn` (read-only-turn.ts): a detached checkout of HEAD under
 * `<dataDir>/plan-drafts/<id>`, read-only enforced by the session ruleset, and a Forge tool
 * scope with the fixed role `architect` (plan_read / plan_write / plan_edit only) keyed by the
 * draft id, the plan's key in the `plans` table. `--continue` prompts the same session again.
 */
import { randomBytes } from 'node:crypto';
import { access, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import type { ForgeRepositories, PlanDraftRow } from '../storage/repositories';
import { ReadOnlyTurnError, runReadOnlyTurn, type ReadOnlyTurnDeps } from './read-only-turn';
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

export interface PlanDrafterDeps extends ReadOnlyTurnDeps {
  dataDir: string;
  repos: ForgeRepositories;
  /** The project of a folder inside a git repository (fails clearly when it is none). */
  projectOf(repoPath: string): Promise<{ projectId: string; repoDir: string; headCommit: string }>;
  /** The architect's model: the requested one, else the configured one; null lets opencode choose the user's default. */
  resolveModel(requested: string | null, repoPath: string): Promise<string | null>;
}

export interface DraftRequest {
  repoPath: string;
  request: string;
  model?: string | null;
  /** File to write the plan to; default defaultDraftPath (in the data folder). Refused when it exists. */
  outPath?: string | null;
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

/**
 * Where a drafted plan goes without --out, for `forge plan` and VS Code alike (issue 28): the
 * data folder, outside the user's working tree, so a draft never shows as an untracked file
 * there (which every run would warn about).
 */
export function defaultDraftPath(dataDir: string, draftId: string): string {
  return join(dataDir, 'plans', draftFileName(draftId));
}

export function createPlanDrafter(deps: PlanDrafterDeps): PlanDrafter {
  const checkoutDirFor = (id: string) => join(deps.dataDir, 'plan-drafts', id);

  async function exists(path: string): Promise<boolean> {
    return access(path).then(
      () => true,
      () => false,
    );
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
    const planBefore = deps.repos.plans.get(projectId, draft.id);
    try {
      let turn;
      try {
        turn = await runReadOnlyTurn(deps, {
          role: 'architect',
          label: `plan-${draft.id}`,
          project,
          checkoutDir: checkoutDirFor(draft.id),
          scopeKey: draft.id,
          model: draft.model,
          sessionId: draft.sessionId,
          sessionTitle: architectSessionTitle(draft.request),
          prompt: text,
          onSession: (sessionId) => deps.repos.planDrafts.update(projectId, draft.id, { sessionId }),
          ...(options.signal ? { signal: options.signal } : {}),
          ...(options.onProgress ? { onProgress: options.onProgress } : {}),
        });
      } catch (error) {
        if (!(error instanceof ReadOnlyTurnError)) throw error;
        if (error.sessionId) {
          // The prompt was sent: the turn counts, with what it cost.
          deps.repos.planDrafts.update(projectId, draft.id, { status: error.code === 'busy' ? 'interrupted' : 'failed', turns: draft.turns + 1, ...(error.usage ? { usage: error.usage } : {}) });
        }
        throw new PlanDraftError(error.code, error.message);
      }
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
        lastReply: turn.reply || null,
        ...(turn.usage ? { usage: turn.usage } : {}),
      });
      return { draft: updated, outcome, plan: stored?.content ?? null, reply: turn.reply };
    } catch (error) {
      // A turn that failed before its prompt (checkout, opencode, session) leaves no draft "drafting".
      if (deps.repos.planDrafts.get(projectId, draft.id)?.status === 'drafting') deps.repos.planDrafts.update(projectId, draft.id, { status: 'failed' });
      throw error;
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
      const model = await deps.resolveModel(request.model ?? null, request.repoPath);
      const id = randomBytes(4).toString('hex');
      const outPath = resolve(request.outPath ?? defaultDraftPath(deps.dataDir, id));
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
