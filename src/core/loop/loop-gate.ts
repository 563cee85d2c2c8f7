/**
 * The verification gate's I/O side (issue 13): runs the checks a `run_checks` transition asks
 * for in the loop's worktree (through the loop's executor: its sandbox, or the host), records
 * every run in the check log, turns each failure into a finding (source 'check') and resolves a
 * check's finding when the check passes. What it returns is the event for the pure table.
 */
import { createHash } from 'node:crypto';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { ToolchainPlace } from '../checks/missing-command';
import { checkFinding, checkFindingFingerprint, DEFAULT_CHECK_TIMEOUT_MS, runCheck, summariseCheckResults, type CheckExecutor, type CheckResult, type CheckSpec } from '../checks';
import { createForgeRepositories, type CheckRunRow, type ForgeRepositories } from '../storage/repositories';
import type { SqlExecutor } from '../storage/sql-executor';
import { checksForFinal, checksForSection } from './loop-checks';
import type { StoredLoopExtras } from './loop-extras';
import type { LoopEvent, Transition } from './transitions';

export interface GateRunDeps {
  db: SqlExecutor & { transaction<T>(fn: (tx: SqlExecutor) => T): T };
  projectId: string;
  loopName: string;
  worktreeDir: string;
  extras: StoredLoopExtras;
  exec: CheckExecutor;
  /** Where the checks run, for findings (`in the worktree`, `on the committed work (…)`); default the worktree. */
  ranOn?: string;
  /** Where the loop's commands find their programs (a missing command's finding names it). */
  toolchain?: ToolchainPlace;
  /** Aborted when the loop is cancelled: the running check stops, its result is `cancelled`. */
  signal?: AbortSignal;
  /** Each run, once it is in the check log. */
  onRun?: (run: CheckRunRow) => void;
}

export type GateOutcome =
  | { kind: 'event'; event: Extract<LoopEvent, { type: 'checks_passed' | 'checks_failed' }>; results: CheckResult[] }
  /** The loop was cancelled while a check ran: nothing about the work is known. */
  | { kind: 'cancelled'; results: CheckResult[] };

/** The specs a gate runs. */
export function gateChecks(extras: StoredLoopExtras, request: Extract<Transition, { kind: 'run_checks' }>): CheckSpec[] {
  const all = extras.checks ?? [];
  return request.gate === 'section' ? checksForSection(all, request.sectionIndex ?? -1) : checksForFinal(all);
}

export async function runGate(deps: GateRunDeps, request: Extract<Transition, { kind: 'run_checks' }>): Promise<GateOutcome> {
  const { extras, worktreeDir } = deps;
  const state = extras.loopState;
  const specs = gateChecks(extras, request);
  const results: CheckResult[] = [];
  const isWorktreeFile = (path: string) => {
    try {
      return existsSync(join(worktreeDir, path)) && statSync(join(worktreeDir, path)).isFile();
    } catch {
      return false;
    }
  };
  for (const spec of specs) {
    const result = await runCheck(spec, {
      cwd: worktreeDir,
      exec: deps.exec,
      timeoutMs: extras.checkTimeoutMs ?? DEFAULT_CHECK_TIMEOUT_MS,
      ...(deps.signal ? { signal: deps.signal } : {}),
    });
    results.push(result);
    const finding = checkFinding(spec, result, { worktreeDir, isWorktreeFile, ...(deps.ranOn ? { ranOn: deps.ranOn } : {}), ...(deps.toolchain ? { toolchain: deps.toolchain } : {}) });
    // The run and what it means for its finding commit together.
    const run = deps.db.transaction((tx) => {
      const repos: ForgeRepositories = createForgeRepositories(tx);
      const row = repos.checkRuns.append(deps.projectId, {
        loopName: deps.loopName,
        iteration: state.iteration,
        sectionIndex: request.gate === 'section' ? request.sectionIndex : state.sectionIndex,
        gate: request.gate,
        checkId: spec.id,
        label: spec.label,
        kind: spec.kind,
        command: spec.kind === 'command' ? spec.command : null,
        status: result.status,
        message: result.message,
        exitCode: result.exitCode,
        signal: result.signal,
        durationMs: result.durationMs,
        outputTail: result.outputTail,
        outputBytes: result.outputBytes,
        startedAt: result.startedAt,
      });
      if (finding) {
        repos.reviewFindings.record(deps.projectId, {
          loopName: deps.loopName,
          file: finding.file,
          line: finding.line,
          severity: finding.severity,
          description: finding.description,
          // A section's check belongs to its section; the rest are the loop's (like a final audit's).
          sectionIndex: spec.scope.kind === 'section' ? spec.scope.index : null,
          fingerprint: finding.fingerprint,
          source: 'check',
        });
      } else if (result.status === 'passed') {
        repos.reviewFindings.resolveCheckFinding(deps.projectId, deps.loopName, checkFindingFingerprint(spec));
      }
      return row;
    });
    deps.onRun?.(run);
    if (result.status === 'cancelled') return { kind: 'cancelled', results };
  }
  const summary = summariseCheckResults(results);
  if (summary.passed) return { kind: 'event', event: { type: 'checks_passed', gate: request.gate }, results };
  const first = summary.failed[0]!;
  return { kind: 'event', event: { type: 'checks_failed', gate: request.gate, failed: `${first.label} (${first.message})` }, results };
}

/**
 * A finding of the gate itself (source 'check', severity bug), not of one check: the work cannot
 * be committed, the verification was changed (issue 27). `description` null resolves its open
 * one (the condition is gone). While open it keeps the loop from completing like a failed check.
 */
export function recordGateFinding(
  deps: Pick<GateRunDeps, 'db' | 'projectId' | 'loopName'>,
  finding: { fingerprint: string; file: string; description: string | null },
): void {
  deps.db.transaction((tx) => {
    const repos = createForgeRepositories(tx);
    if (finding.description === null) repos.reviewFindings.resolveCheckFinding(deps.projectId, deps.loopName, finding.fingerprint);
    else {
      repos.reviewFindings.record(deps.projectId, {
        loopName: deps.loopName,
        file: finding.file,
        line: 0,
        severity: 'bug',
        description: finding.description,
        sectionIndex: null,
        fingerprint: finding.fingerprint,
        source: 'check',
      });
    }
  });
}

/** Fingerprints of the gate's `verification changed` findings start so. */
export const VERIFICATION_CHANGED_PREFIX = 'gate:verification-changed:';

/**
 * Records each change of the verification as an open finding (issue 27) that only the user can
 * accept (dismiss: the same change is then never raised again), and resolves those the branch no
 * longer makes. Returns the changes still open (not accepted).
 */
export function recordVerificationChanges(deps: Pick<GateRunDeps, 'db' | 'projectId' | 'loopName'>, changes: ReadonlyArray<{ file: string; what: string }>): Array<{ file: string; what: string }> {
  return deps.db.transaction((tx) => {
    const repos = createForgeRepositories(tx);
    const existing = repos.reviewFindings.listByLoop(deps.projectId, deps.loopName).filter((f) => f.fingerprint.startsWith(VERIFICATION_CHANGED_PREFIX));
    const open: Array<{ file: string; what: string }> = [];
    const current = new Set<string>();
    for (const change of changes) {
      const fingerprint = `${VERIFICATION_CHANGED_PREFIX}${createHash('sha1').update(`${change.file}\0${change.what}`).digest('hex').slice(0, 16)}`;
      current.add(fingerprint);
      if (existing.some((f) => f.fingerprint === fingerprint && f.status === 'dismissed')) continue;
      open.push(change);
      if (existing.some((f) => f.fingerprint === fingerprint && f.status === 'open')) continue;
      repos.reviewFindings.record(deps.projectId, {
        loopName: deps.loopName,
        file: change.file,
        line: 0,
        severity: 'bug',
        description: [
          `Verification changed: ${change.what}.`,
          "The loop's checks must pass as the user wrote them: undo this change (adding new tests is free).",
          'Only the user can accept it: dismiss this finding (`forge findings LOOP --accept ID`, or Dismiss in VS Code), or allow such changes with a line "Allow verification changes" in the plan\'s Verification part.',
        ].join('\n'),
        sectionIndex: null,
        fingerprint,
        source: 'check',
      });
    }
    for (const f of existing) if (f.status === 'open' && !current.has(f.fingerprint)) repos.reviewFindings.resolveCheckFinding(deps.projectId, deps.loopName, f.fingerprint);
    return open;
  });
}
