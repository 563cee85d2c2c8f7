/**
 * The loop's spend: each session's token usage recorded at its end, the 80 % budget warning,
 * and the budget's hold on the next session (the cost governor). Its own file because it is
 * the supervisor's one concern that reads opencode's usage and the budget, and nothing else.
 */
import type { AgentClient } from '../opencode/agent-client';
import { createForgeRepositories } from '../storage/repositories';
import { budgetDecision, budgetWarning, hasBudget, spendFromTotals } from './budget';
import { readExtras } from './loop-extras';
import { roleOfPhase, type LoopState } from './state';
import type { CurrentSession, SupervisorContext } from './supervisor-deps';
import type { UsageFigures } from './runtime-types';

export class LoopSpend {
  constructor(private readonly ctx: SupervisorContext) {}

  /** Records what `session` used (a round trip to opencode), then warns when the budget is nearly spent. */
  async recordUsage(client: AgentClient | undefined, session: CurrentSession): Promise<void> {
    const { ref, deps } = this.ctx;
    try {
      const usage = await client!.usage(session.id);
      deps.db.transaction((tx) => {
        const repos = createForgeRepositories(tx);
        for (const u of usage) {
          repos.sessionUsage.record(
            ref.projectId,
            { loopName: ref.name, sessionId: session.id, role: session.role, model: `${u.providerId}/${u.modelId}` },
            {
              inputTokens: u.usage.input,
              outputTokens: u.usage.output,
              reasoningTokens: u.usage.reasoning,
              cacheReadTokens: u.usage.cacheRead,
              cacheWriteTokens: u.usage.cacheWrite,
              cost: u.cost,
              messages: u.messages,
            },
          );
        }
      });
      const sum = (k: 'input' | 'output' | 'reasoning' | 'cacheRead' | 'cacheWrite') => usage.reduce((n, u) => n + u.usage[k], 0);
      const sessionFigures: UsageFigures = {
        inputTokens: sum('input'),
        outputTokens: sum('output'),
        reasoningTokens: sum('reasoning'),
        cacheReadTokens: sum('cacheRead'),
        cacheWriteTokens: sum('cacheWrite'),
        cost: usage.reduce((n, u) => n + u.cost, 0),
      };
      const t = deps.repos.sessionUsage.totalsForLoop(ref.projectId, ref.name);
      const total: UsageFigures = { inputTokens: t.inputTokens, outputTokens: t.outputTokens, reasoningTokens: t.reasoningTokens, cacheReadTokens: t.cacheReadTokens, cacheWriteTokens: t.cacheWriteTokens, cost: t.cost };
      deps.emit({ type: 'loop.usage', loop: ref, sessionId: session.id, role: session.role, session: sessionFigures, total });
      this.warnOnBudget();
    } catch (error) {
      deps.log.warn(`[loop ${ref.name}] usage of ${session.id} unavailable: ${String(error)}`);
    }
  }

  /** The loop's spend so far, by role, from the usage recorded at each session's end. */
  private spend() {
    return spendFromTotals(this.ctx.deps.repos.sessionUsage.totalsByRole(this.ctx.ref.projectId, this.ctx.ref.name));
  }

  /**
   * The cap inside a session (issue 28): the spend recorded so far plus what the running session
   * used, as opencode's events reported it after each model step. The pause message when a limit
   * that binds this session's role is spent, else null (also when the usage is not known).
   */
  pauseDuringSession(client: AgentClient | undefined, session: CurrentSession): string | null {
    const extras = readExtras(this.ctx.loop());
    if (!hasBudget(extras.budget) || !client?.usageSoFar) return null;
    // A session that handed off already ends at its idle, where the hand-over pauses the loop.
    if (this.ctx.deps.repos.handoffs.forSession(this.ctx.ref.projectId, this.ctx.ref.name, session.id)) return null;
    const live = client.usageSoFar(session.id);
    if (!live) return null;
    const spend = this.spend();
    for (const u of live) {
      spend[session.role].cost += u.cost;
      spend[session.role].tokens += u.usage.input + u.usage.output + u.usage.reasoning + u.usage.cacheRead + u.usage.cacheWrite;
    }
    const decision = budgetDecision(extras.budget, spend, session.role, true, true);
    return decision.kind === 'pause' ? decision.message : null;
  }

  /** Why the budget holds back the session of `to` (its message), or null when it may start. */
  budgetPause(to: LoopState): string | null {
    const extras = readExtras(this.ctx.loop());
    if (!hasBudget(extras.budget)) return null;
    const decision = budgetDecision(extras.budget, this.spend(), roleOfPhase(to.phase), true);
    return decision.kind === 'pause' ? decision.message : null;
  }

  /** The 80 % warning, once per run of the loop (the flag is stored, so a takeover keeps it). */
  private warnOnBudget(): void {
    const extras = readExtras(this.ctx.loop());
    if (!hasBudget(extras.budget) || extras.budgetWarned) return;
    const decision = budgetWarning(extras.budget, this.spend());
    if (!decision) return;
    this.ctx.deps.repos.loops.mergeState(this.ctx.ref.projectId, this.ctx.ref.name, { budgetWarned: true });
    this.ctx.deps.emit({ type: 'loop.budget', loop: this.ctx.ref, level: 'warning', message: decision.message });
  }
}
