// Synthetic loops and findings for bench/ui-scale.mjs, and the pure measurements that run
// both in plain Node and inside the VS Code extension host (bench/ui-scale-host.ts).
import { performance } from 'node:perf_hooks';
import type { DiagnosticFinding } from '../src/vscode/findings-diagnostics-model';
import { buildLoopDiagnostics, type LoopDiagnostics } from '../src/vscode/findings-diagnostics-model';
import { buildLoopTree, type LoopSummary } from '../src/vscode/loop-tree-model';

const STATUSES = ['running', 'completed', 'cancelled', 'errored', 'stalled'] as const;
const PHASES = ['coding', 'auditing', 'final_auditing', 'final_audit_fix', 'post_action'] as const;

export function syntheticSummaries(count: number): LoopSummary[] {
  const now = Date.now();
  return Array.from({ length: count }, (_, i): LoopSummary => ({
    loop: {
      projectId: 'bench-project',
      name: `loop-${i}`,
      status: i % 10 === 0 ? 'running' : STATUSES[1 + (i % 4)]!,
      phase: PHASES[i % PHASES.length]!,
      kind: i % 7 === 0 ? 'goal' : 'plan',
      iteration: 1 + (i % 12),
      maxIterations: 15,
      sectionIndex: i % 5,
      worktreeDir: `/data/worktrees/loop-${i}`,
      branch: `forge/loop-${i}`,
      terminationReason: i % 10 === 0 ? null : 'completed',
      model: 'anthropic/claude-sonnet-4-5',
      auditorModel: 'openai/gpt-5',
      sandbox: i % 3 === 0,
      supervisorId: i % 10 === 0 ? 'pid:1' : null,
      leaseExpiresAt: null,
      updatedAt: now - i * 1000,
      endedAt: i % 10 === 0 ? null : now - i * 1000,
      state: { loopState: { sectionCount: 6 }, title: `Bench loop ${i}` },
    },
    openFindings: { bug: i % 4, warning: i % 3 },
    usage: { sessions: 1 + (i % 9), cost: i * 0.0137, inputTokens: 12_000 * (1 + (i % 5)), outputTokens: 900 * (1 + (i % 7)) },
    pseudoFindings: i % 25 === 0 ? [{ id: i, file: 'PLAN', severity: 'warning', description: 'Section 3 contradicts the objective.' }] : [],
    supervisedHere: i % 20 === 0,
  }));
}

/** `findingCount` open findings spread evenly over `fileCount` files of `loopCount` loops. */
export function syntheticFindings(findingCount: number, fileCount: number, loopCount: number): { worktreeDir: string; loopName: string; findings: DiagnosticFinding[] }[] {
  const filesPerLoop = Math.ceil(fileCount / loopCount);
  const perFile = Math.ceil(findingCount / fileCount);
  const loops: { worktreeDir: string; loopName: string; findings: DiagnosticFinding[] }[] = [];
  let id = 1;
  for (let l = 0; l < loopCount; l++) {
    const loopName = `loop-${l}`;
    const findings: DiagnosticFinding[] = [];
    for (let f = 0; f < filesPerLoop && l * filesPerLoop + f < fileCount; f++) {
      for (let k = 0; k < perFile && id <= findingCount; k++) {
        findings.push({
          id: id++,
          projectId: 'bench-project',
          loopName,
          file: `src/module-${f}/file-${f}.ts`,
          line: 1 + k * 7,
          severity: k % 3 === 0 ? 'bug' : 'warning',
          description: `Finding ${k} on file ${f}: the error path leaks the handle when the read fails.`,
          scenario: k % 2 === 0 ? 'Call read() on a closed stream.' : null,
          status: 'open',
          recurrenceCount: 1 + (k % 4),
          sectionIndex: k % 6,
        });
      }
    }
    loops.push({ worktreeDir: `/data/worktrees/${loopName}`, loopName, findings });
  }
  return loops;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function timeRuns(runs: number, fn: () => void): number[] {
  fn(); // warm-up (JIT), not counted
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    fn();
    times.push(performance.now() - t);
  }
  return times;
}

/** Pure parts, as plain Node runs them: the tree model for `loops` loops, the diagnostics model for the findings. */
export function measurePure(runs: number, loops = 1000, findings = 20_000, files = 1000, findingLoops = 50) {
  const summaries = syntheticSummaries(loops);
  const tree = timeRuns(runs, () => {
    const groups = buildLoopTree(summaries);
    if (groups.reduce((n, g) => n + g.loops.length, 0) !== loops) throw new Error('tree lost loops');
  });
  const data = syntheticFindings(findings, files, findingLoops);
  let built: LoopDiagnostics[] = [];
  const diagnostics = timeRuns(runs, () => {
    built = data.map((l) => buildLoopDiagnostics(l.worktreeDir, l.findings));
  });
  const fileTotal = built.reduce((n, d) => n + d.byFile.size, 0);
  const specTotal = built.reduce((n, d) => n + [...d.byFile.values()].reduce((m, s) => m + s.length, 0), 0);
  if (fileTotal !== files || specTotal !== findings) throw new Error(`diagnostics model built ${specTotal} diagnostics on ${fileTotal} files`);
  return { treeMs: tree, diagnosticsModelMs: diagnostics };
}
