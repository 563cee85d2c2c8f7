import * as path from 'node:path';
import * as vscode from 'vscode';
import type { DraftResult } from '../../core/plan-draft/plan-drafter';
import type { ForgeEngine } from '../engine-contract';
import type { ForgeContext } from '../forge-context';
import { errorMessage } from '../log';
import { refuseIfUntrusted } from '../trust';
import { engineWithProgress, noWorkspace, refused, registerForgeCommand, type CommandResult } from './command-support';

/**
 * *Forge: Draft Plan* and *Forge: Answer the Architect / Ask for Changes* (issue 15): the
 * read-only architect drafts a plan of record in the engine (engine.planner), this opens it as
 * a markdown document the user edits and executes with *Forge: Execute Plan*. Drafted plans are
 * files in Forge's data folder (`<dataDir>/plans/forge-plan-<id>.md`): Forge writes nothing into
 * the user's working tree; the user may save the document anywhere.
 *
 * `forge.draftPlan` takes an optional request string (the chat participant's `/plan` passes
 * the text after it), or `{ request }`; without one it asks. `forge.continueDraft` takes
 * `{ id?, answer? }`; the draft defaults to the one of the active editor, else the last one.
 */
export interface DraftPlanCommandDetail {
  readonly draftId: string;
  readonly status: string;
  /** The plan file, or null when the architect wrote no plan. */
  readonly outPath: string | null;
  readonly reply: string;
  readonly cost: number;
  readonly turns: number;
}

const DRAFT_FILE_RE = /^forge-plan-([a-z0-9]{6,16})\.md$/;
const REPLY_SHOWN_CHARS = 400;

export function registerPlanCommands(ctx: ForgeContext): void {
  /** Draft id → repository folder, for --continue from the editor of a drafted plan. */
  const drafts = new Map<string, string>();
  let lastDraftId: string | undefined;

  async function runDrafting(title: string, work: (signal: AbortSignal, report: (m: string) => void) => Promise<DraftResult>): Promise<DraftResult | 'cancelled'> {
    const abort = new AbortController();
    try {
      return await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, (progress, token) => {
        token.onCancellationRequested(() => abort.abort());
        return work(abort.signal, (message) => progress.report({ message }));
      });
    } catch (error) {
      if (abort.signal.aborted) return 'cancelled';
      throw error;
    }
  }

  async function present(result: DraftResult, repoPath: string): Promise<CommandResult> {
    const { draft, outcome, reply } = result;
    drafts.set(draft.id, repoPath);
    lastDraftId = draft.id;
    const cost = vscode.l10n.t('{0} · {1} input + {2} output tokens', `$${draft.cost.toFixed(4)}`, draft.inputTokens, draft.outputTokens);
    ctx.log.info(`plan draft ${draft.id}: ${draft.status}, turn ${draft.turns}, ${cost}${reply ? `; the architect says: ${reply}` : ''}`);
    const said = reply ? (reply.length > REPLY_SHOWN_CHARS ? `${reply.slice(0, REPLY_SHOWN_CHARS - 1)}…` : reply) : '';
    const answer = vscode.l10n.t('Answer the Architect');
    const detail: DraftPlanCommandDetail = { draftId: draft.id, status: draft.status, outPath: outcome.kind === 'drafted' ? draft.outPath : null, reply, cost: draft.cost, turns: draft.turns };
    if (outcome.kind === 'drafted') {
      const document = await vscode.workspace.openTextDocument(vscode.Uri.file(draft.outPath));
      await vscode.window.showTextDocument(document, { preview: false });
      const execute = vscode.l10n.t('Execute Plan');
      const message = [vscode.l10n.t('Forge: plan drafted ({0}; {1}).', outcome.summary, cost), ...outcome.warnings, said ? vscode.l10n.t('The architect says: {0}', said) : ''].filter(Boolean).join(' ');
      void ctx.notifier.info(message, answer, execute).then((choice) => {
        if (choice === answer) void vscode.commands.executeCommand('forge.continueDraft', { id: draft.id });
        if (choice === execute) void vscode.commands.executeCommand('forge.executePlan', vscode.Uri.file(draft.outPath));
      });
    } else {
      void ctx.notifier.warn([outcome.message.replace(/ with forge plan --continue .*$/, '.'), said ? vscode.l10n.t('The architect says: {0}', said) : ''].filter(Boolean).join(' '), answer).then((choice) => {
        if (choice === answer) void vscode.commands.executeCommand('forge.continueDraft', { id: draft.id });
      });
    }
    return { status: 'done', detail };
  }

  function repositoryFolder(engine: ForgeEngine): string | undefined {
    return ctx.projects.startFolder(engine, vscode.window.activeTextEditor?.document.uri)?.uri.fsPath;
  }

  registerForgeCommand(ctx, 'forge.draftPlan', vscode.l10n.t('Draft Plan'), async (arg) => {
    const untrusted = refuseIfUntrusted(ctx.notifier, vscode.l10n.t('draft a plan'));
    if (untrusted) return { status: 'refused', reason: 'untrusted', message: untrusted };
    const missing = noWorkspace(ctx, vscode.l10n.t('draft a plan'));
    if (missing) return missing;
    const given = typeof arg === 'string' ? arg : arg && typeof arg === 'object' && typeof (arg as { request?: unknown }).request === 'string' ? (arg as { request: string }).request : undefined;
    const request =
      given ??
      (await vscode.window.showInputBox({
        title: vscode.l10n.t('Forge: Draft Plan'),
        prompt: vscode.l10n.t('What do you want done? The architect reads the repository (it changes nothing) and drafts a plan you can edit and execute.'),
        placeHolder: vscode.l10n.t('e.g. Add a --verbose flag to the CLI'),
        ignoreFocusOut: true,
        validateInput: (v) => (v.trim() === '' ? vscode.l10n.t('Say what you want planned.') : undefined),
      }));
    if (request === undefined) return { status: 'cancelled' };
    if (request.trim() === '') return refused(ctx, 'no-plan', vscode.l10n.t('Forge: Draft Plan needs a request: say what you want planned.'));
    const engine = await engineWithProgress(ctx);
    const repoPath = repositoryFolder(engine);
    if (!repoPath) return refused(ctx, 'no-repository', vscode.l10n.t('Forge drafts plans for your own repository folder, and only loop worktrees are open: open the repository folder.'));
    const result = await runDrafting(vscode.l10n.t('Forge: the architect is drafting a plan…'), (signal, report) =>
      engine.planner.draft({ repoPath, request, signal, onProgress: report }),
    );
    if (result === 'cancelled') return { status: 'cancelled' };
    return present(result, repoPath);
  });

  registerForgeCommand(ctx, 'forge.continueDraft', vscode.l10n.t('Answer the Architect / Ask for Changes'), async (arg) => {
    const untrusted = refuseIfUntrusted(ctx.notifier, vscode.l10n.t('continue a plan draft'));
    if (untrusted) return { status: 'refused', reason: 'untrusted', message: untrusted };
    const args = (arg && typeof arg === 'object' ? arg : {}) as { id?: string; answer?: string };
    const editor = vscode.window.activeTextEditor;
    const fromEditor = editor ? DRAFT_FILE_RE.exec(path.basename(editor.document.uri.fsPath))?.[1] : undefined;
    const id = args.id ?? fromEditor ?? lastDraftId;
    if (!id) return refused(ctx, 'no-plan', vscode.l10n.t('There is no plan draft to continue: run Forge: Draft Plan first.'));
    const engine = await engineWithProgress(ctx);
    const repoPath = drafts.get(id) ?? repositoryFolder(engine);
    if (!repoPath) return refused(ctx, 'no-repository', vscode.l10n.t('Open the repository folder of this plan draft first.'));
    const draft = await engine.planner.get(repoPath, id);
    if (!draft) return refused(ctx, 'no-plan', vscode.l10n.t('Forge has no plan draft {0} for this repository.', id));
    const answer =
      args.answer ??
      (await vscode.window.showInputBox({
        title: vscode.l10n.t('Forge: Answer the architect / ask for changes'),
        prompt: draft.lastReply ? vscode.l10n.t('The architect said: {0}', draft.lastReply.slice(0, REPLY_SHOWN_CHARS)) : vscode.l10n.t('What should the architect change?'),
        ignoreFocusOut: true,
        validateInput: (v) => (v.trim() === '' ? vscode.l10n.t('Give your answer or the change you want.') : undefined),
      }));
    if (answer === undefined) return { status: 'cancelled' };
    // The user's unsaved edits of the plan count: the architect continues from their version.
    const open = vscode.workspace.textDocuments.find((d) => d.uri.fsPath === draft.outPath);
    if (open?.isDirty) await open.save();
    try {
      const result = await runDrafting(vscode.l10n.t('Forge: the architect is revising the plan…'), (signal, report) =>
        engine.planner.continue({ repoPath, id, answer, signal, onProgress: report }),
      );
      if (result === 'cancelled') return { status: 'cancelled' };
      return present(result, repoPath);
    } catch (error) {
      ctx.notifier.error(vscode.l10n.t('Forge: the architect could not continue draft {0}', id), error);
      return { status: 'failed', message: errorMessage(error) };
    }
  });
}
