/**
 * A loop's verification checks (issue 13): parsed once at start from the plan (its Verification
 * part and each section's `Verify:` lines) or the goal's options, stored with the loop and never
 * changed after, and chosen per gate. Pure.
 */
import { describeCheckProblems, parseGoalCheckOptions, parseSectionChecks, parseVerificationChecks, type CheckSpec, type GoalCheckOptions } from '../checks';
import type { LoopGate } from './state';

export interface LoopChecks {
  checks: CheckSpec[];
  notes: string[];
  /** Every problem in one message (what is wrong, how to fix it); null when all can run. */
  problems: string | null;
}

/** The checks of a plan: its Verification part, then each section's `Verify:` lines. */
export function planChecks(plan: { verification: string | null; sections: ReadonlyArray<{ index: number; body: string }> }): LoopChecks {
  const parts = [
    { parsed: parseVerificationChecks(plan.verification), what: "The plan's Verification part" },
    ...plan.sections.map((s) => ({ parsed: parseSectionChecks(s), what: `Section ${s.index + 1} of the plan` })),
  ];
  const problems = parts.map((p) => describeCheckProblems(p.parsed, p.what)).filter((t): t is string => t !== null);
  return {
    checks: parts.flatMap((p) => p.parsed.checks),
    notes: parts.flatMap((p) => p.parsed.notes),
    problems: problems.length > 0 ? `${problems.join('\n')}\nFix the plan and start it again.` : null,
  };
}

/** The contract of a goal: its `--check`, `--exists`, `--contains` and `--matches` options. */
export function goalChecks(options: GoalCheckOptions | undefined): LoopChecks {
  const parsed = parseGoalCheckOptions(options ?? {});
  const problems = describeCheckProblems(parsed, 'The goal');
  return { checks: parsed.checks, notes: parsed.notes, problems: problems ? `${problems}\nFix the options and start the goal again.` : null };
}

/** How many checks each gate runs: what the pure transition table needs to know. */
export function loopGate(checks: readonly CheckSpec[], sectionCount: number): LoopGate {
  const sectionChecks = Array.from({ length: sectionCount }, (_, index) => checksForSection(checks, index).length);
  return { sectionChecks, finalChecks: checksForFinal(checks).length };
}

/** The checks a section's audit runs: its own `Verify:` lines. */
export function checksForSection(checks: readonly CheckSpec[], index: number): CheckSpec[] {
  return checks.filter((c) => c.scope.kind === 'section' && c.scope.index === index);
}

/**
 * The checks that must pass before the loop completes: every check, on the final tree (a plan's
 * Verification part and every section's lines; a goal's contract).
 */
export function checksForFinal(checks: readonly CheckSpec[]): CheckSpec[] {
  return [...checks];
}
