/**
 * Feature groups, what the feature splitter is told (pure). The agent prompt
 * (forge-splitter.md) says how to split; this says what to split, where the code is, and how
 * the turn must end. The PRD goes between `<prd>` lines, where the embedded scripted model
 * reads it back.
 */
import { MAX_GROUP_FEATURES } from '../vocabulary/group-vocabulary';

export interface SplitterPromptInput {
  prdText: string;
  prdSource: string;
  /** Absolute path of the read-only checkout of HEAD. */
  checkoutDir: string;
  headCommit: string;
  groupId: string;
}

export function buildSplitterPrompt(input: SplitterPromptInput): string {
  return [
    '# Split a PRD into features',
    '',
    `The repository is checked out (read-only for you) at ${input.checkoutDir}, at commit ${input.headCommit.slice(0, 12)}: the commit every feature's loop starts from. Read the code you need there (read, grep, glob, list). You cannot edit files, run shell commands or start subagents: Forge refuses them.`,
    '',
    `## The PRD (${input.prdSource})`,
    '',
    '<prd>',
    input.prdText.trimEnd(),
    '</prd>',
    '',
    '## How to finish',
    '',
    `- Write every feature with one \`forge_features_write\` call: id, title, dependsOn (ids), and the complete plan of each (1 to ${MAX_GROUP_FEATURES} features). Their loops are named "${input.groupId}-<id>".`,
    '- Forge checks the split and answers with the problems to fix; write again until it confirms. The user reviews the plans before they run.',
    '- If the PRD holds nothing that can be built, write nothing and say why.',
  ].join('\n');
}

export function splitterSessionTitle(prdSource: string): string {
  return `Forge split · ${prdSource.replace(/^.*[\\/]/, '').slice(0, 60)}`;
}
