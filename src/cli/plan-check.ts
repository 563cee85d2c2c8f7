/**
 * `forge check PLAN.md` and the validation `forge run` does before it starts: the pure
 * validation of src/core/loop/plan-validation.ts, with files looked up in the repository.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { validatePlan, type PlanValidation } from '../core/loop/plan-validation';

/** The repository's top-level folder, where the plan's paths are relative to; `dir` itself when git cannot tell. */
function repositoryRoot(dir: string): string {
  try {
    return execFileSync('git', ['-C', dir, 'rev-parse', '--show-toplevel'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || dir;
  } catch {
    return resolve(dir);
  }
}

export function validatePlanInRepository(text: string, planPath: string, repo: string): PlanValidation {
  const root = repositoryRoot(repo);
  return validatePlan(text, { source: planPath, pathExists: (relative) => existsSync(join(root, relative)) });
}
