/**
 * Forge's embedded model: the scripted OpenAI-compatible server playing a deterministic coder
 * and auditor, used when no real model is configured so that a loop always runs (the demo, a
 * fresh install). It is honest about what it is: the coder writes exactly the files a plan
 * spells out in fenced blocks (```lang file=path), runs the section's `Run:` command, and hands
 * off; the auditor reads the open findings and hands off. Nothing here parses prose to decide a
 * loop transition — the agents still end their passes through Forge's handoff tool.
 */
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

const CONFLICT_START = /^<{7}(?: (.*))?$/;
const CONFLICT_BASE = /^\|{7}(?: .*)?$/;
const CONFLICT_MIDDLE = /^={7}$/;
const CONFLICT_END = /^>{7}(?: (.*))?$/;

/** Whether a file's text carries git's conflict markers. */
export function hasConflictMarkers(content: string): boolean {
  const lines = content.split('\n');
  return lines.some((l) => CONFLICT_START.test(l)) && lines.some((l) => CONFLICT_MIDDLE.test(l)) && lines.some((l) => CONFLICT_END.test(l));
}

/**
 * The embedded coder's resolution of a merge conflict, deterministic and honest about it: every
 * hunk keeps both sides, the side already in a group's integration branch (`forge/group/…`, else
 * the incoming side) first, then the other; a line both sides have is kept once; the merge
 * base (diff3 style) is dropped.
 */
export function resolveConflictMarkers(content: string): string {
  const out: string[] = [];
  const lines = content.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const start = CONFLICT_START.exec(lines[i]!);
    if (!start) {
      out.push(lines[i]!);
      continue;
    }
    const ours: string[] = [];
    const theirs: string[] = [];
    let part: 'ours' | 'base' | 'theirs' = 'ours';
    let theirLabel = '';
    let j = i + 1;
    for (; j < lines.length; j++) {
      const line = lines[j]!;
      if (part === 'ours' && CONFLICT_BASE.test(line)) part = 'base';
      else if (part !== 'theirs' && CONFLICT_MIDDLE.test(line)) part = 'theirs';
      else if (part === 'theirs' && CONFLICT_END.test(line)) {
        theirLabel = CONFLICT_END.exec(line)![1] ?? '';
        break;
      } else if (part === 'ours') ours.push(line);
      else if (part === 'theirs') theirs.push(line);
    }
    const oursIntegrated = /forge\/group\//.test(start[1] ?? '') && !/forge\/group\//.test(theirLabel);
    const [first, second] = oursIntegrated ? [ours, theirs] : [theirs, ours];
    out.push(...first, ...second.filter((l) => !first.includes(l)));
    i = j;
  }
  return out.join('\n');
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

/** One feature as the embedded splitter reads it from a PRD. */
export interface PrdFeatureSection {
  id: string;
  title: string;
  dependsOn: string[];
  plan: string;
}

const FEATURE_HEADING = /^##[ \t]+Feature[ \t]+([^\s:]+)[ \t]*:[ \t]*(.+?)[ \t#]*$/i;
const DEPENDS_LINE = /^[ \t]*Depends[ \t]+on[ \t]*:[ \t]*(.*)$/i;

/**
 * The features a PRD spells out as `## Feature <id>: <title>` sections (an optional line
 * `Depends on: a, b` inside). Each section's body becomes the feature's plan: titled with the
 * feature's title, its `### ` sub-headings become the plan's `## ` sections (a body without
 * any is one section). Headings inside fenced blocks are text.
 */
export function prdFeatureSections(prd: string): PrdFeatureSection[] {
  const lines = prd.replace(/\r\n?/g, '\n').split('\n');
  const features: Array<{ id: string; title: string; dependsOn: string[]; body: string[] }> = [];
  let current: (typeof features)[number] | null = null;
  let fence: string | null = null;
  for (const line of lines) {
    const marker = /^[ \t]{0,3}(`{3,}|~{3,})/.exec(line)?.[1];
    if (marker && (fence === null || marker.startsWith(fence))) fence = fence === null ? marker : null;
    else if (fence === null) {
      const heading = FEATURE_HEADING.exec(line);
      if (heading) {
        current = { id: heading[1]!, title: heading[2]!, dependsOn: [], body: [] };
        features.push(current);
        continue;
      }
      if (/^#{1,2}[ \t]/.test(line)) {
        current = null;
        continue;
      }
      const depends = current ? DEPENDS_LINE.exec(line) : null;
      if (current && depends) {
        current.dependsOn = depends[1]!.split(/[,\s]+/).map((d) => d.trim()).filter((d) => d && !/^\(?none\)?$/i.test(d));
        continue;
      }
      if (current && /^###[ \t]/.test(line)) {
        current.body.push(line.slice(1));
        continue;
      }
    }
    current?.body.push(line);
  }
  return features.map((f) => {
    const body = f.body.join('\n').trim();
    const sectioned = /^##[ \t]/m.test(body);
    const plan = [`# ${f.title}`, '', ...(sectioned ? [] : [`## ${f.title}`]), body, ''].join('\n');
    return { id: f.id, title: f.title, dependsOn: f.dependsOn, plan };
  });
}

/** The PRD inside the splitter's prompt (between `<prd>` and `</prd>` lines). */
function prdOf(prompt: string): string | null {
  const start = prompt.indexOf('\n<prd>\n');
  const end = prompt.lastIndexOf('\n</prd>');
  return start >= 0 && end > start ? prompt.slice(start + 7, end) : null;
}

/** The embedded feature splitter: writes the PRD's `## Feature` sections, once; nothing when there are none. */
function embeddedSplitterStep(request: ScriptedRequest, prompt: string, called: string[]): ScriptStep {
  if (called.includes('forge_features_write')) {
    const answer = request.toolResults.find((r) => r.name === 'forge_features_write')?.content ?? '';
    return text(/cannot use this split/i.test(answer) ? `Forge refused the split; the embedded scripted model does not rewrite PRDs.\n\n${answer}` : 'Wrote the features as the PRD spells them out.');
  }
  const features = prdFeatureSections(prdOf(prompt) ?? '');
  if (features.length === 0) {
    return text('The PRD has no "## Feature <id>: <title>" sections, so Forge\'s embedded scripted model cannot split it. Configure a real model (setting forge.model or FORGE_MODEL) to split free-form PRDs.');
  }
  return toolCall('forge_features_write', { features });
}

export function embeddedAgentStep(request: ScriptedRequest): ScriptStep {
  const prompt = firstUserText(request);
  const called = toolsCalled(request);
  if (request.toolNames.includes('forge_features_write')) return embeddedSplitterStep(request, prompt, called);
  const isCoder = request.toolNames.includes('write');
  if (called.includes('forge_loop_handoff')) return text('Handed off to Forge.');
  if (isCoder) {
    const task = currentTask(prompt);
    const worktree = worktreeOf(prompt);
    // A finding that shows conflicted files (a group's merge queue handed back a conflict): read
    // each, then write it with both sides kept; the task's own blocks are not written again.
    const conflicted = fileBlocks(prompt).filter((b) => hasConflictMarkers(b.content));
    if (worktree && conflicted.length > 0) {
      if (request.toolNames.includes('read') && !called.includes('read')) {
        return { kind: 'tool-calls', calls: conflicted.map((b) => ({ name: 'read', args: { filePath: join(worktree, b.path) } })) };
      }
      if (!called.includes('write')) {
        return { kind: 'tool-calls', calls: conflicted.map((b) => ({ name: 'write', args: { filePath: join(worktree, b.path), content: resolveConflictMarkers(b.content) } })) };
      }
      return toolCall('forge_loop_handoff', {
        decisions: `Resolved the merge conflict in ${conflicted.map((b) => b.path).join(', ')} by keeping both sides (the integrated work first).`,
        verification: 'No check run by the embedded model; Forge runs the loop\'s checks at its gate and on the merged tree.',
        notesForAuditor: 'Written by Forge\'s embedded scripted model.',
      });
    }
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
