/**
 * Feature groups (issue 14 part 3), the pure checks: what the splitter wrote, the group id, the
 * concurrency cap. No I/O; the group service calls these before it stores anything, and the
 * splitter's tool answers with `describeSplitProblems` so the agent can fix its write.
 */
import { validatePlan } from '../loop/plan-validation';
import { isLoopName, LOOP_NAME_MAX_LENGTH, slugifyLoopName } from '../workspace/loop-name';
import { FEATURE_ID_PATTERN, MAX_GROUP_CONCURRENCY, MAX_GROUP_FEATURES, MIN_GROUP_CONCURRENCY } from '../vocabulary/group-vocabulary';
import { GroupError } from './group-types';

/** One feature as the splitter writes it. */
export interface SplitFeature {
  id: string;
  title: string;
  dependsOn: string[];
  plan: string;
}

export type SplitProblemCode = 'bad_prd' | 'cycle' | 'unknown_dependency' | 'duplicate_feature' | 'bad_plan';

export interface SplitProblem {
  code: SplitProblemCode;
  /** The feature the problem is about (null: the split as a whole). */
  featureId: string | null;
  message: string;
}

/** Characters a default group id keeps from the PRD's title (room for `-<feature id>` in a loop name). */
const DEFAULT_GROUP_ID_CHARS = 15;
/** The longest group id: a loop name `<group>-<feature>` must fit in 48 characters with a short feature id. */
export const MAX_GROUP_ID_LENGTH = 24;

/**
 * The dependency cycle among `features`, as the ids walked (`['a', 'b', 'a']`), or null. Unknown
 * dependencies are ignored here (they are a problem of their own).
 */
export function findDependencyCycle(features: ReadonlyArray<Pick<SplitFeature, 'id' | 'dependsOn'>>): string[] | null {
  const deps = new Map(features.map((f) => [f.id, f.dependsOn.filter((d) => features.some((o) => o.id === d))]));
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (id: string): string[] | null => {
    if (state.get(id) === 'done') return null;
    if (state.get(id) === 'visiting') return [...path.slice(path.indexOf(id)), id];
    state.set(id, 'visiting');
    path.push(id);
    for (const d of deps.get(id) ?? []) {
      const cycle = visit(d);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(id, 'done');
    return null;
  };
  for (const f of features) {
    const cycle = visit(f.id);
    if (cycle) return cycle;
  }
  return null;
}

export function describeCycle(cycle: readonly string[]): string {
  return cycle.join(' → ');
}

/** Every problem of a split, in the order a reader fixes them; empty: the split can be stored. */
export function checkFeatureSplit(features: readonly SplitFeature[], groupId?: string): SplitProblem[] {
  const problems: SplitProblem[] = [];
  if (features.length === 0) {
    return [{ code: 'bad_prd', featureId: null, message: 'The split has no features. Write at least one feature, or write nothing if the PRD holds nothing to build.' }];
  }
  if (features.length > MAX_GROUP_FEATURES) {
    problems.push({ code: 'bad_prd', featureId: null, message: `The split has ${features.length} features; a group holds at most ${MAX_GROUP_FEATURES}. Merge features or leave some for a later PRD.` });
  }
  const seen = new Set<string>();
  for (const f of features) {
    if (!FEATURE_ID_PATTERN.test(f.id)) {
      problems.push({ code: 'bad_prd', featureId: f.id, message: `Feature id "${f.id}" is not valid: use lower-case letters, digits and "-" (starting with a letter or digit, at most 32 characters), e.g. "search-api".` });
    } else if (groupId !== undefined && !isLoopName(`${groupId}-${f.id}`)) {
      problems.push({ code: 'bad_prd', featureId: f.id, message: `Feature id "${f.id}" makes the loop name "${groupId}-${f.id}", which is not a valid loop name (at most ${LOOP_NAME_MAX_LENGTH} characters, no doubled or trailing "-"). Use a shorter id.` });
    }
    if (seen.has(f.id)) problems.push({ code: 'duplicate_feature', featureId: f.id, message: `Feature id "${f.id}" is used twice; give each feature its own id.` });
    seen.add(f.id);
    if (!f.title.trim()) problems.push({ code: 'bad_prd', featureId: f.id, message: `Feature "${f.id}" has no title.` });
  }
  for (const f of features) {
    for (const d of f.dependsOn) {
      if (d === f.id) problems.push({ code: 'cycle', featureId: f.id, message: `Feature "${f.id}" depends on itself (${describeCycle([f.id, f.id])}).` });
      else if (!seen.has(d)) problems.push({ code: 'unknown_dependency', featureId: f.id, message: `Feature "${f.id}" depends on "${d}", which is not a feature of this split. Known ids: ${[...seen].join(', ')}.` });
    }
  }
  const cycle = findDependencyCycle(features.map((f) => ({ id: f.id, dependsOn: f.dependsOn.filter((d) => d !== f.id) })));
  if (cycle) problems.push({ code: 'cycle', featureId: cycle[0]!, message: `The dependencies form a cycle: ${describeCycle(cycle)}. No feature of a cycle could ever start; remove one of these dependencies.` });
  for (const f of features) {
    for (const p of planErrors(f.plan, `the plan of feature "${f.id}"`)) problems.push({ code: 'bad_plan', featureId: f.id, message: p });
  }
  return problems;
}

/** The errors (not warnings) Forge's plan validation finds in a feature's plan. */
export function planErrors(plan: string, source: string): string[] {
  return validatePlan(plan, { source })
    .problems.filter((p) => p.severity === 'error')
    .map((p) => `${source}, line ${p.line + 1}: ${p.message}`);
}

/** The problems as the tool's answer to the splitter (and as a refusal's message). */
export function describeSplitProblems(problems: readonly SplitProblem[]): string {
  return [`Forge cannot use this split (${problems.length} problem${problems.length === 1 ? '' : 's'}); fix them and call forge_features_write again:`, ...problems.map((p) => `- ${p.message}`)].join('\n');
}

/** The first problem as the GroupError a caller sees (its code names the kind of problem). */
export function splitError(problems: readonly SplitProblem[], prdSource: string): GroupError {
  const first = problems.find((p) => p.code === 'cycle') ?? problems[0]!;
  return new GroupError(`The split of ${prdSource} cannot run: ${problems.map((p) => p.message).join(' ')}`, first.code);
}

/** What is wrong with a concurrency cap (null: nothing). */
export function capProblem(cap: number): string | null {
  if (Number.isInteger(cap) && cap >= MIN_GROUP_CONCURRENCY && cap <= MAX_GROUP_CONCURRENCY) return null;
  return `The number of loops a group runs at once must be a whole number from ${MIN_GROUP_CONCURRENCY} to ${MAX_GROUP_CONCURRENCY}, not ${String(cap)}.`;
}

export function checkCap(cap: number): number {
  const problem = capProblem(cap);
  if (problem) throw new GroupError(problem, 'bad_cap');
  return cap;
}

/** What is wrong with a group id a user typed (null: nothing). */
export function groupIdProblem(id: string): string | null {
  if (isLoopName(id) && id.length <= MAX_GROUP_ID_LENGTH) return null;
  return `"${id}" cannot be a group id: use lower-case letters, digits and single "-" (at most ${MAX_GROUP_ID_LENGTH} characters), e.g. "release-2". It prefixes the loop names of its features.`;
}

/** A default group id from the PRD's first heading (or its source), not among `taken`. */
export function defaultGroupId(prdText: string, prdSource: string, taken: ReadonlySet<string>): string {
  const heading = /^#\s+(.+?)\s*#*\s*$/m.exec(prdText)?.[1];
  const base = slugifyLoopName(heading ?? prdSource.replace(/^.*[\\/]/, '').replace(/\.[a-z]+$/i, '')).slice(0, DEFAULT_GROUP_ID_CHARS).replace(/-+$/, '') || 'group';
  if (!taken.has(base)) return base;
  for (let n = 2; ; n++) if (!taken.has(`${base}-${n}`)) return `${base}-${n}`;
}

/** The review copy's file name: `01-auth.md`, in split order. */
export function reviewFileName(index: number, featureId: string): string {
  return `${String(index + 1).padStart(2, '0')}-${featureId}.md`;
}
