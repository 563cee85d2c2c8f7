/**
 * The supervisor's pass through the verification gate: after a clean audit of a gated step it
 * runs the step's checks (loop-gate.ts does the running and recording) and gives the transition
 * their result makes. Its own file because a pass can take minutes and must stop at once on a
 * cancel, which needs its own state (the abort of the check running now).
 */
import { readSetupState } from './loop-setup';
import { isPreparedEntry } from '../workspace/worktree-setup/worktree-setup';
import { allowsVerificationChanges, detectVerificationChanges, type CheckExecutor, type VerificationChange } from '../checks';
import { toolchainPlaceOf } from '../checks/missing-command';
import { LOOP_SANDBOX_STATE_KEY } from '../sandbox/types';
import type { DeliveredWork } from '../workspace/delivered-work';
import { recordGateFinding, recordVerificationChanges, runGate } from './loop-gate';
import { recordAgentGitChanges } from './agent-git-findings';
import { readExtras } from './loop-extras';
import type { LoopFindings } from './loop-findings';
import type { PhaseWrites } from './phase-writes';
import type { SupervisorContext } from './supervisor-deps';
import { nextTransition, type LoopEvent, type Transition } from './transitions';

/** The gate's own finding while the loop's work cannot be committed. */
const UNDELIVERABLE_FINGERPRINT = 'gate:undeliverable';
/** The manifests whose scripts and targets a check may run (verification-changes.ts). */
const MANIFESTS = ['package.json', 'GNUmakefile', 'makefile', 'Makefile'];

export class GatePass {
  /** Stops the verification check running now (a cancel must not wait for a 10-minute test run). */
  private abortController: AbortController | undefined;

  constructor(
    private readonly ctx: SupervisorContext,
    private readonly writes: PhaseWrites,
    private readonly findings: LoopFindings,
  ) {}

  /** What the delivered tree changed, since the loop's base, of what the loop's checks run; nothing when the plan allows it. */
  private async verificationChanges(worktreeDir: string, base: string, tree: string, extras: ReturnType<typeof readExtras>): Promise<VerificationChange[]> {
    const checks = extras.checks ?? [];
    if (checks.length === 0 || allowsVerificationChanges(extras.verification)) return [];
    const worktrees = this.ctx.deps.worktrees;
    const changed = await worktrees.changedSince(worktreeDir, base, tree);
    const texts = new Map<string, { base: string | null; now: string | null }>();
    const commands = checks.map((c) => (c.kind === 'command' ? c.command : '')).join('\n');
    // Only the manifests a check can invoke are read (two git processes each).
    const manifests = MANIFESTS.filter((file) => (file === 'package.json' ? /\b(npm|yarn|pnpm|bun)\b/ : /\bg?make\b/).test(commands));
    for (const file of manifests) texts.set(file, { base: await worktrees.textAt(worktreeDir, base, file), now: await worktrees.textAt(worktreeDir, tree, file) });
    return detectVerificationChanges({ checks, changed, textAt: (file) => texts.get(file) ?? { base: null, now: null } });
  }

  /** Stops the check running now, if any: its pass then gives the cancel's transition. */
  abort(): void {
    this.abortController?.abort();
  }

  /**
   * Runs the checks a clean audit's gated step needs (loop-gate.ts) and gives the transition
   * their result makes: the step, or back to coding. Caller holds the lock; no session runs.
   */
  async pass(request: Extract<Transition, { kind: 'run_checks' }>): Promise<Transition> {
    const { ref, deps } = this.ctx;
    const loop = this.ctx.loop();
    const extras = readExtras(loop);
    const abort = new AbortController();
    this.abortController = abort;
    try {
      // Writes of the hand-over that led here go first (the gate's own writes follow them).
      this.writes.flush();
      this.writes.emitEvents();
      // The gate verifies what the loop delivers (issue 27): what its next commit holds, in
      // place when the worktree is proven to hold nothing else, else in a clean checkout of it.
      // Work git cannot commit (a tracked file replaced by a named pipe) fails the gate; its
      // checks still run in the worktree, for what they say.
      let delivered: DeliveredWork;
      let undeliverable: string | null = null;
      try {
        const setup = readSetupState(loop);
        delivered = await deps.worktrees.deliveredWork(
          loop.worktreeDir!,
          ref.name,
          (changes) => recordAgentGitChanges({ repos: deps.repos, emit: deps.emit }, ref, changes),
          setup ? (p) => isPreparedEntry(setup, loop.worktreeDir!, p) : undefined,
        );
      } catch (error) {
        undeliverable = (error as Error).message;
        delivered = { kind: 'in-place', tree: 'uncommitable' };
      }
      const gateFindingDeps = { db: deps.db, projectId: ref.projectId, loopName: ref.name };
      recordGateFinding(gateFindingDeps, {
        fingerprint: UNDELIVERABLE_FINGERPRINT,
        file: '',
        description:
          undeliverable === null
            ? null
            : `The loop's work cannot be committed, so the gate cannot pass: ${undeliverable}\nMake every file of the work a regular file, folder or symbolic link that git can commit.`,
      });
      // The agent cannot weaken a check (issue 27): what the branch changed of what the checks run.
      let verificationChanged: Array<{ file: string; what: string }> = [];
      if (undeliverable === null && loop.baseCommit) {
        try {
          verificationChanged = recordVerificationChanges(gateFindingDeps, await this.verificationChanges(loop.worktreeDir!, loop.baseCommit, delivered.tree, extras));
        } catch (error) {
          if (delivered.kind === 'checkout') await delivered.dispose().catch(() => undefined);
          throw error;
        }
      }
      let run: { exec: CheckExecutor; release(): Promise<void> };
      try {
        run = delivered.kind === 'in-place' ? { exec: await deps.checkExecutor(loop), release: async () => undefined } : await deps.checkExecutorOver(loop, delivered.dir);
      } catch (error) {
        if (delivered.kind === 'checkout') await delivered.dispose().catch(() => undefined);
        deps.emit({ type: 'loop.notice', loop: ref, level: 'error', message: (error as Error).message });
        return { kind: 'terminate', event: 'sandbox_lost', to: extras.loopState, reason: { kind: 'worktree_failed', message: (error as Error).message }, effects: [] };
      }
      const tree = delivered.tree.slice(0, 12);
      if (delivered.kind === 'checkout') {
        deps.emit({ type: 'loop.notice', loop: ref, level: 'info', message: `the checks run on a clean checkout of the work the loop commits (tree ${tree}): ${delivered.why}` });
      }
      let outcome: Awaited<ReturnType<typeof runGate>>;
      try {
        outcome = await runGate(
          {
            db: deps.db,
            projectId: ref.projectId,
            loopName: ref.name,
            worktreeDir: delivered.kind === 'checkout' ? delivered.dir : loop.worktreeDir!,
            ranOn:
              undeliverable !== null
                ? 'in the worktree (its work cannot be committed)'
                : delivered.kind === 'checkout'
                  ? `on the committed work (a clean checkout of tree ${tree}; ${delivered.why})`
                  : `on the committed work (the worktree, which holds nothing else; tree ${tree})`,
            extras,
            toolchain: toolchainPlaceOf(loop.sandbox, loop.state[LOOP_SANDBOX_STATE_KEY]),
            exec: run.exec,
            signal: abort.signal,
            onRun: (r) => deps.emit({ type: 'loop.check', loop: ref, run: r }),
          },
          request,
        );
      } finally {
        await run.release().catch((e) => deps.log.warn(`[loop ${ref.name}] releasing the gate's sandbox: ${String(e)}`));
        if (delivered.kind === 'checkout') await delivered.dispose().catch((e) => deps.log.warn(`[loop ${ref.name}] removing the gate's checkout: ${String(e)}`));
      }
      this.findings.reportChanges();
      let event: LoopEvent = outcome.kind === 'cancelled' || abort.signal.aborted ? { type: 'cancel' } : outcome.event;
      if (event.type === 'checks_passed' && undeliverable !== null) event = { type: 'checks_failed', gate: request.gate, failed: `the work cannot be committed (${undeliverable})` };
      if (event.type === 'checks_passed' && verificationChanged.length > 0) {
        event = { type: 'checks_failed', gate: request.gate, failed: `verification changed: ${verificationChanged.map((c) => c.what).join('; ')}` };
      }
      const now = readExtras(this.ctx.loop());
      return nextTransition(now.loopState, event, now.limits);
    } finally {
      this.abortController = undefined;
    }
  }
}
