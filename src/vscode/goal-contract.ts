import * as vscode from 'vscode';
/**
 * A goal's contract as Execute Goal asks for it: two optional one-line inputs, turned into the
 * same options `forge goal --check/--exists/--contains/--matches` takes, and checked by the
 * same parser the runtime uses, so VS Code refuses exactly what the CLI refuses. Pure (no
 * VS Code API, no I/O).
 *
 * - Commands: `npm test; node cli.js --version`, one check per `;`-separated part (chain
 *   commands that must run together with `&&`).
 * - File assertions, `;`-separated: `PATH:TEXT` (the file contains TEXT), `PATH` (it exists),
 *   `exists: PATH`, `contains: PATH:TEXT`, `matches: PATH:/REGEX/FLAGS` (the plan's words).
 */
import { describeCheckProblems, parseGoalCheckOptions, type GoalCheckOptions } from '../core/checks/parse';

/** `;`-separated parts; a trailing `;` is harmless, an empty part between two is kept (and refused as an empty check). */
function splitParts(text: string): string[] {
  if (text.trim() === '') return [];
  const parts = text.split(';').map((part) => part.trim());
  if (parts[parts.length - 1] === '') parts.pop();
  return parts;
}

/** The contract from what was typed in the two boxes; empty input gives empty lists (no contract). */
export function goalContractFromInput(commands: string, fileAssertions: string): Required<GoalCheckOptions> {
  const contract = { check: splitParts(commands), exists: [] as string[], contains: [] as string[], matches: [] as string[] };
  for (const part of splitParts(fileAssertions)) {
    const keyword = /^(exists|contains|matches)\s*:\s*(.*)$/i.exec(part);
    if (keyword) contract[keyword[1]!.toLowerCase() as 'exists' | 'contains' | 'matches'].push(keyword[2]!.trim());
    else if (part.includes(':')) contract.contains.push(part);
    else contract.exists.push(part);
  }
  return contract;
}

/** Whether the contract names any check. */
export const hasGoalContract = (contract: GoalCheckOptions): boolean =>
  [contract.check, contract.exists, contract.contains, contract.matches].some((list) => (list?.length ?? 0) > 0);

/** Forge's message listing every check it cannot run (empty command, path outside the worktree …), or null. */
export function goalContractProblems(contract: GoalCheckOptions): string | null {
  return describeCheckProblems(parseGoalCheckOptions(contract), vscode.l10n.t('The goal'));
}
