// The `@forge` chat participant: `/plan` drafts a plan (Forge: Draft Plan, when this build has
// it), `/run` executes the open plan, `/status` lists the loops with buttons. It answers with
// Forge's own engine and commands and never asks VS Code's language models (request.model is
// not read). VS Code builds without the chat API (or without a chat view) still activate Forge:
// the participant is then simply not registered.
import * as vscode from 'vscode';
import type { CommandResult } from '../commands/command-support';
import type { ForgeLog } from '../log';
import type { LoopSummary } from '../loop-tree-model';
import { chatStatusAnswer, escapeMarkdown } from './chat-status';

export const CHAT_PARTICIPANT_ID = 'forge.chat';
export const DRAFT_PLAN_COMMAND = 'forge.draftPlan';

/** The part of VS Code's chat API Forge uses. */
export interface ChatApi {
  createChatParticipant(id: string, handler: vscode.ChatRequestHandler): vscode.ChatParticipant;
}

/** The chat API of this VS Code build, or undefined when it has none (older builds, forks without chat). */
export function chatApiOf(api: { readonly chat?: unknown }): ChatApi | undefined {
  const chat = api.chat as Partial<ChatApi> | undefined;
  return chat && typeof chat.createChatParticipant === 'function' ? (chat as ChatApi) : undefined;
}

export interface ForgeChatDeps {
  readonly log: ForgeLog;
  readonly extensionUri: vscode.Uri;
  /** The workspace's loops, fresh (starts the engine on first use). */
  readonly loops: () => Promise<readonly LoopSummary[]>;
  readonly executeCommand: <T>(command: string, ...args: unknown[]) => Thenable<T>;
  readonly commandExists: (command: string) => Thenable<boolean>;
  /** The markdown document of the active (or last active) text editor: the plan `/run` executes. */
  readonly openPlan: () => vscode.Uri | undefined;
}

/** What a chat answer reports back to VS Code (and to tests through the participant's result). */
export interface ForgeChatResult extends vscode.ChatResult {
  readonly metadata: { readonly command: string; readonly outcome: string };
}

/**
 * Registers `@forge` where the chat API exists; returns undefined (and logs why) where it does
 * not, so that activation goes on without it.
 */
export function registerForgeChat(chat: ChatApi | undefined, deps: ForgeChatDeps): vscode.Disposable | undefined {
  if (!chat) {
    deps.log.info('this VS Code build has no chat API: the @forge chat participant is not registered');
    return undefined;
  }
  try {
    const participant = chat.createChatParticipant(CHAT_PARTICIPANT_ID, (request, _context, stream, token) => answer(deps, request, stream, token));
    participant.iconPath = vscode.Uri.joinPath(deps.extensionUri, 'media', 'forge.svg');
    return participant;
  } catch (error) {
    // A build whose chat API exists but refuses participants (no chat view, a policy) must not stop activation.
    deps.log.warn(`the @forge chat participant could not be registered: ${error instanceof Error ? error.message : String(error)}`);
    return undefined;
  }
}

export async function answer(deps: ForgeChatDeps, request: Pick<vscode.ChatRequest, 'command' | 'prompt'>, stream: vscode.ChatResponseStream, token: vscode.CancellationToken): Promise<ForgeChatResult> {
  const command = request.command ?? 'status';
  const result = (outcome: string): ForgeChatResult => ({ metadata: { command, outcome } });
  switch (command) {
    case 'plan':
      return result(await answerPlan(deps, request.prompt.trim(), stream));
    case 'run':
      return result(await answerRun(deps, stream));
    case 'status': {
      if (request.prompt.trim() !== '' && !request.command) {
        stream.markdown(vscode.l10n.t('`@forge` answers `/plan <request>`, `/run` and `/status`; here are the loops.') + '\n\n');
      }
      stream.progress(vscode.l10n.t('Reading the loops…'));
      const summaries = await deps.loops();
      if (token.isCancellationRequested) return result('cancelled');
      const status = chatStatusAnswer(summaries);
      stream.markdown(status.markdown);
      for (const button of status.buttons) stream.button(button);
      return result(`loops:${summaries.length}`);
    }
    default:
      stream.markdown(vscode.l10n.t('`@forge` knows `/plan`, `/run` and `/status`.'));
      return result('unknown-command');
  }
}

async function answerPlan(deps: ForgeChatDeps, requestText: string, stream: vscode.ChatResponseStream): Promise<string> {
  if (!(await deps.commandExists(DRAFT_PLAN_COMMAND))) {
    stream.markdown(
      vscode.l10n.t(
        'Drafting a plan is not available in this build of Forge. Write the plan yourself as a markdown file (`##` sections of work and a `## Verification` part of commands Forge runs itself), open it and run `@forge /run`; or draft one from a terminal with `forge plan "<request>"` where your Forge CLI has it.',
      ),
    );
    stream.button({ command: 'workbench.action.openWalkthrough', title: vscode.l10n.t('Open the Forge Walkthrough'), arguments: ['forge-dev.forge#forge.gettingStarted', false] });
    return 'draft-unavailable';
  }
  if (requestText === '') {
    stream.markdown(vscode.l10n.t('Say what the plan should achieve: `@forge /plan add a --version flag to the CLI`.'));
    return 'no-request';
  }
  stream.progress(vscode.l10n.t('Forge is drafting a plan…'));
  await deps.executeCommand(DRAFT_PLAN_COMMAND, requestText);
  stream.markdown(vscode.l10n.t('Forge: Draft Plan is on it; the draft opens in the editor. Review it, then run `@forge /run`.'));
  return 'drafting';
}

async function answerRun(deps: ForgeChatDeps, stream: vscode.ChatResponseStream): Promise<string> {
  const plan = deps.openPlan();
  if (!plan) {
    // Execute Plan would ask for a file; from chat, the plan is the one open in the editor.
    stream.markdown(vscode.l10n.t('Open the plan (a markdown file) in the editor first, then ask `@forge /run` again.'));
    return 'no-plan';
  }
  stream.progress(vscode.l10n.t('Forge is starting the plan {0}…', vscode.workspace.asRelativePath(plan)));
  const outcome = await deps.executeCommand<CommandResult | undefined>('forge.executePlan', plan);
  if (!outcome) {
    stream.markdown(vscode.l10n.t('Forge: Execute Plan gave no answer.'));
    return 'no-answer';
  }
  switch (outcome.status) {
    case 'started':
      stream.markdown(vscode.l10n.t('Started the loop **{0}**. Follow it in the Loop Explorer or the dashboard; `@forge /status` tells where it stands.', escapeMarkdown(outcome.loop.name)));
      stream.button({ command: 'forge.openDashboard', title: vscode.l10n.t('Open Dashboard'), arguments: [outcome.loop] });
      return 'started';
    case 'done':
      stream.markdown(vscode.l10n.t('Forge opened an opencode session on the plan in a terminal.'));
      return 'done';
    case 'cancelled':
      stream.markdown(vscode.l10n.t('Cancelled: no loop was started.'));
      return 'cancelled';
    case 'refused':
      stream.markdown(escapeMarkdown(outcome.message));
      return `refused:${outcome.reason}`;
    case 'failed':
      stream.markdown(vscode.l10n.t('Forge: Execute Plan failed: {0}', escapeMarkdown(outcome.message)));
      return 'failed';
  }
}
