// Findings as diagnostics at scale: VS Code forwards at most ~1 100 diagnostics of one
// DiagnosticCollection.set call to the workbench and silently drops the rest, so the Problems
// view (the workbench's marker service, read through the harness) must still show every
// finding Forge publishes, and none once they are cleared or a file's findings go.
import * as assert from 'node:assert/strict';
import * as vscode from 'vscode';
import { FindingsDiagnostics } from '../../../src/vscode/findings-diagnostics';
import { buildLoopDiagnostics, type DiagnosticFinding, type LoopDiagnostics } from '../../../src/vscode/findings-diagnostics-model';
import { createForgeLog } from '../../../src/vscode/log';
import type { LoopsModel } from '../../../src/vscode/loops-model';
import { waitFor } from './forge-test-kit';
import { requestWorkbenchProblems, type WorkbenchProblemCounts } from './support/harness';

/** `files` files of `perFile` open findings each (every third a bug) in the worktree of `loop`. */
function loopFindings(loop: string, files: number, perFile: number): LoopDiagnostics {
  const findings: DiagnosticFinding[] = [];
  for (let f = 0; f < files; f++) {
    for (let k = 0; k < perFile; k++) {
      findings.push({
        id: findings.length + 1,
        projectId: 'scale',
        loopName: loop,
        file: `src/file-${f}.ts`,
        line: 1 + k * 3,
        severity: k % 3 === 0 ? 'bug' : 'warning',
        description: `finding ${k} of file ${f}`,
        scenario: k % 2 === 0 ? 'run it twice' : null,
        status: 'open',
        recurrenceCount: 1,
        sectionIndex: null,
      });
    }
  }
  return buildLoopDiagnostics(`/forge-scale-test/worktrees/${loop}`, findings);
}

const total = (c: WorkbenchProblemCounts) => c.errors + c.warnings;

describe('findings diagnostics at scale', function () {
  this.timeout(180_000);
  const noModel = { onDidChange: () => ({ dispose() {} }) } as unknown as LoopsModel;
  const log = createForgeLog({ trace() {}, debug() {}, info() {}, warn() {}, error() {} });
  let diagnostics: FindingsDiagnostics;
  let baseline: WorkbenchProblemCounts;

  before(async () => {
    diagnostics = new FindingsDiagnostics(noModel, () => undefined, log, 'forge-scale-test');
    baseline = await requestWorkbenchProblems();
  });
  after(() => diagnostics?.dispose());

  const workbenchShows = (expected: number) =>
    waitFor(`the workbench to show ${expected} more problems than before`, async () => {
      const now = await requestWorkbenchProblems();
      return total(now) - total(baseline) === expected && now;
    }, 60_000, 250);

  it('shows every one of 3 000 findings on 120 files of 3 loops in the Problems view', async () => {
    diagnostics.update([
      ['scale/a', loopFindings('a', 40, 25)],
      ['scale/b', loopFindings('b', 40, 25)],
      ['scale/c', loopFindings('c', 40, 25)],
    ]);
    const shown = await workbenchShows(3000);
    assert.equal(shown.errors - baseline.errors, 3 * 40 * 9); // k = 0, 3, …, 24 of 25 are bugs
    assert.equal(diagnostics.fileCount(), 120);
  });

  it("removes the diagnostics of the files a loop's findings left, and of a cleared loop", async () => {
    diagnostics.update([['scale/a', loopFindings('a', 10, 25)]], ['scale/c']);
    await workbenchShows(10 * 25 + 40 * 25);
    assert.equal(diagnostics.fileCount(), 50);
    diagnostics.update([], ['scale/a', 'scale/b']);
    await workbenchShows(0);
    assert.equal(diagnostics.fileCount(), 0);
    assert.equal(vscode.languages.getDiagnostics().filter(([uri]) => uri.path.startsWith('/forge-scale-test/')).reduce((n, [, list]) => n + list.length, 0), 0);
  });
});
