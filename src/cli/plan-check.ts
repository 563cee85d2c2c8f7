/**
 * `forge check PLAN.md` and the validation `forge run` does before it starts: the pure
 * validation of src/core/loop/plan-validation.ts, with files looked up in the repository.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { validatePlan, type PlanValidation } from '../core/loop/plan-validation';
import { runProcessSync } from '../core/process/process-runner';

/** The repository's top-level folder, where the plan's paths are relative to; `dir` itself when git cannot tell. */
function repositoryRoot(dir: string): string {
  const top = runProcessSync('git', ['-C', dir, 'rev-parse', '--show-toplevel']);
  return top === null ? resolve(dir) : top.trim() || dir;
}

export function validatePlanInRepository(text: string, planPath: string, repo: string): PlanValidation {
  const root = repositoryRoot(repo);
  return validatePlan(text, { source: planPath, pathExists: (relative) => existsSync(join(root, relative)) });
}
