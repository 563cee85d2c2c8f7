/**
 * Forge's embedded model: the scripted OpenAI-compatible server playing a deterministic coder
 * and auditor, used when no real model is configured so that a loop always runs (the demo, a
 * fresh install). It is honest about what it is: the coder writes exactly the files a plan
 * spells out in fenced blocks (```lang file=path), runs the section's `Run:` command, and hands
 * off; the auditor reads the open findings and hands off. Nothing here parses prose to decide a
 * loop transition — the agents still end their passes through Forge's handoff tool.
 */
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { EmbeddedModel } from '../engine';
import { startScriptedModel, text, toolCall, type ScriptedRequest, type ScriptStep } from './scripted-model';

export const EMBEDDED_PROVIDER_ID = 'forge-embedded';
export const EMBEDDED_MODEL_ID = 'scripted';
export const EMBEDDED_MODEL = `${EMBEDDED_PROVIDER_ID}/${EMBEDDED_MODEL_ID}`;

interface FileBlock {
  path: string;
  content: string;
}

/** Fenced blocks of a section that name their file: ```js file=src/a.js */
export function fileBlocks(markdown: string): FileBlock[] {
  const blocks: FileBlock[] = [];
  const re = /^(```|~~~)[^\n]*?\bfile=([^\s`]+)[^\n]*\n([\s\S]*?)^\1\s*$/gm;
  for (let m = re.exec(markdown); m; m = re.exec(markdown)) blocks.push({ path: m[2]!, content: m[3]! });
  return blocks;
}

/** The section the coder prompt asks for: from "## Your task now" to the next top-level part. */
function currentTask(prompt: string): string {
  const start = prompt.indexOf('## Your task now');
  if (start < 0) return '';
  const rest = prompt.slice(start);
  // The task runs until the findings list or the handoff instructions.
  const end = rest.search(/\n## (Open review findings|When you are done)/);
  return end < 0 ? rest : rest.slice(0, end);
}

function worktreeOf(prompt: string): string | null {
  return /git worktree (\S+?) (?:on branch|\(branch)/.exec(prompt)?.[1] ?? null;
}

function firstUserText(request: ScriptedRequest): string {
  for (const m of request.messages) {
    if (m.role !== 'user') continue;
    if (typeof m.content === 'string') return m.content;
    if (Array.isArray(m.content)) return m.content.map((p: { text?: string }) => p.text ?? '').join('\n');
  }
  return request.lastUserText;
}

/** Which of our own steps already ran in this turn (from the tool calls in the history). */
function toolsCalled(request: ScriptedRequest): string[] {
  return request.messages.flatMap((m) => (m.role === 'assistant' ? (m.tool_calls ?? []).map((c) => c.function.name) : []));
}

export function embeddedAgentStep(request: ScriptedRequest): ScriptStep {
  const prompt = firstUserText(request);
  const called = toolsCalled(request);
  const isCoder = request.toolNames.includes('write');
  if (called.includes('forge_loop_handoff')) return text('Handed off to Forge.');
  if (isCoder) {
    const task = currentTask(prompt);
    const worktree = worktreeOf(prompt);
    const blocks = fileBlocks(task);
    if (!called.includes('write') && worktree && blocks.length > 0) {
      return { kind: 'tool-calls', calls: blocks.map((b) => ({ name: 'write', args: { filePath: join(worktree, b.path), content: b.content } })) };
    }
    const run = /^Run:\s*`([^`]+)`/m.exec(task)?.[1];
    if (run && !called.includes('bash') && worktree) {
      return toolCall('bash', { command: run, description: 'Run the section check' });
    }
    const lastBash = request.toolResults.find((r) => r.name === 'bash')?.content.trim();
    return toolCall('forge_loop_handoff', {
      decisions: blocks.length > 0 ? `Wrote ${blocks.map((b) => b.path).join(', ')} as the plan spells them out.` : 'The embedded scripted model found no file blocks (```lang file=path) in this section, so it changed nothing.',
      verification: run ? `Ran \`${run}\`: ${lastBash ? lastBash.slice(0, 400) : 'no output'}` : 'No check named in the section.',
      notesForAuditor: 'Written by Forge\'s embedded scripted model.',
    });
  }
  // Auditor: look at the open findings, then hand off.
  if (!called.includes('forge_review_read')) return toolCall('forge_review_read', {});
  return toolCall('forge_loop_handoff', {
    summary: 'The embedded scripted auditor checked the open findings; it does not review code itself.',
    done: true,
    deviations: '',
    followUps: 'Configure a real model (setting forge.model or FORGE_MODEL) for a real review.',
  });
}

export async function startEmbeddedModel(): Promise<EmbeddedModel> {
  const model = await startScriptedModel({ handler: embeddedAgentStep, modelId: EMBEDDED_MODEL_ID, title: 'Forge loop' });
  return {
    model: EMBEDDED_MODEL,
    config: {
      provider: {
        [EMBEDDED_PROVIDER_ID]: {
          npm: '@ai-sdk/openai-compatible',
          name: 'Forge embedded scripted model',
          options: { baseURL: model.baseURL, apiKey: 'embedded' },
          models: { [EMBEDDED_MODEL_ID]: { name: 'Forge scripted', tool_call: true, cost: { input: 0, output: 0 }, limit: { context: 200_000, output: 8192 } } },
        },
      },
    },
    close: () => model.close(),
  };
}

/** Whether the user's opencode configuration names a default model (then Forge uses it). */
export async function userHasDefaultModel(env: NodeJS.ProcessEnv): Promise<boolean> {
  const inline = env.OPENCODE_CONFIG_CONTENT;
  if (inline && /"model"\s*:/.test(inline)) return true;
  const configHome = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config');
  const candidates = [env.OPENCODE_CONFIG, join(configHome, 'opencode', 'opencode.json'), join(configHome, 'opencode', 'opencode.jsonc'), join(configHome, 'opencode', 'config.json')];
  for (const file of candidates) {
    if (!file) continue;
    try {
      const content = await readFile(file, 'utf8');
      if (/^\s*"model"\s*:\s*"[^"]+"/m.test(content)) return true;
    } catch {
      /* not there */
    }
  }
  return false;
}
