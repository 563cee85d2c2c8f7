import { strict as assert } from 'node:assert';
import { initialState, parseTerminationReason, PHASES, terminationReasonToString, terminationStatusFor, type LoopLimits, type LoopState, type Phase } from '../../../src/core/loop/state';
import {
  LOOP_EVENT_TYPES,
  iterationCap,
  nextTransition,
  restartState,
  retryDelayMs,
  type LoopEvent,
  type LoopEventType,
  type Transition,
} from '../../../src/core/loop/transitions';

const limits: LoopLimits = {
  maxIterations: 15,
  maxConsecutiveStalls: 5,
  maxModelRetries: 3,
  auditorFallbackModels: [],
  postAction: false,
};

function state(phase: Phase, over: Partial<LoopState> = {}): LoopState {
  return { ...initialState('plan', 3), phase, sectionIndex: 1, iteration: 4, ...over } as LoopState;
}

const clean = { openBugsInSection: 0, openBugs: 0, openFindings: 0 };
function handoff(role: 'code' | 'auditor', counts: Partial<typeof clean> & { sections?: { count: number; firstPending: number | null } } = {}): LoopEvent {
  return { type: 'handoff', role, ...clean, ...counts };
}

function eventOf(type: LoopEventType, phase: Phase): LoopEvent {
  switch (type) {
    case 'handoff':
      return handoff(phase === 'auditing' || phase === 'final_auditing' ? 'auditor' : 'code');
    case 'model_error':
    case 'model_retries_exhausted':
    case 'worktree_failed':
      return { type, message: 'boom' };
    case 'checks_passed':
      return { type, gate: phase === 'auditing' ? 'section' : 'final' };
    case 'checks_failed':
      return { type, gate: phase === 'auditing' ? 'section' : 'final', failed: 'check 1: node test.js (exited with code 1)' };
    default:
      return { type } as LoopEvent;
  }
}

/** The expected outcome of every phase × event pair (with clean handoffs, fresh budgets). */
const expected: Record<Phase, Record<LoopEventType, string>> = {
  coding: {
    handoff: 'advance:auditing',
    checks_passed: 'ignore',
    checks_failed: 'ignore',
    idle_without_handoff: 'remind_handoff:coding',
    stall: 'retrigger:coding',
    model_error: 'retrigger:coding',
    model_retries_exhausted: 'terminate:error_max_retries',
    cancel: 'terminate:cancelled',
    user_abort: 'terminate:user_aborted',
    shutdown: 'terminate:shutdown',
    session_creation_failed: 'terminate:session_creation_failed',
    worktree_missing: 'terminate:missing_worktree_dir',
    worktree_failed: 'terminate:worktree_failed',
    budget_reached: 'terminate:budget_reached',
  },
  auditing: {
    handoff: 'advance:coding',
    checks_passed: 'advance:coding',
    checks_failed: 'advance:coding',
    idle_without_handoff: 'remind_handoff:auditing',
    stall: 'retrigger:auditing',
    model_error: 'retrigger:auditing',
    model_retries_exhausted: 'terminate:error_max_retries',
    cancel: 'terminate:cancelled',
    user_abort: 'terminate:user_aborted',
    shutdown: 'terminate:shutdown',
    session_creation_failed: 'terminate:session_creation_failed',
    worktree_missing: 'terminate:missing_worktree_dir',
    worktree_failed: 'terminate:worktree_failed',
    budget_reached: 'terminate:budget_reached',
  },
  final_auditing: {
    handoff: 'terminate:completed',
    checks_passed: 'terminate:completed',
    checks_failed: 'advance:final_audit_fix',
    idle_without_handoff: 'remind_handoff:final_auditing',
    stall: 'retrigger:final_auditing',
    model_error: 'retrigger:final_auditing',
    model_retries_exhausted: 'terminate:error_max_retries',
    cancel: 'terminate:cancelled',
    user_abort: 'terminate:user_aborted',
    shutdown: 'terminate:shutdown',
    session_creation_failed: 'terminate:session_creation_failed',
    worktree_missing: 'terminate:missing_worktree_dir',
    worktree_failed: 'terminate:worktree_failed',
    budget_reached: 'terminate:budget_reached',
  },
  final_audit_fix: {
    handoff: 'advance:final_auditing',
    checks_passed: 'ignore',
    checks_failed: 'ignore',
    idle_without_handoff: 'remind_handoff:final_audit_fix',
    stall: 'retrigger:final_audit_fix',
    model_error: 'retrigger:final_audit_fix',
    model_retries_exhausted: 'terminate:error_max_retries',
    cancel: 'terminate:cancelled',
    user_abort: 'terminate:user_aborted',
    shutdown: 'terminate:shutdown',
    session_creation_failed: 'terminate:session_creation_failed',
    worktree_missing: 'terminate:missing_worktree_dir',
    worktree_failed: 'terminate:worktree_failed',
    budget_reached: 'terminate:budget_reached',
  },
  post_action: {
    handoff: 'terminate:completed',
    checks_passed: 'ignore',
    checks_failed: 'ignore',
    idle_without_handoff: 'remind_handoff:post_action',
    stall: 'retrigger:post_action',
    model_error: 'retrigger:post_action',
    model_retries_exhausted: 'terminate:error_max_retries',
    cancel: 'terminate:cancelled',
    user_abort: 'terminate:user_aborted',
    shutdown: 'terminate:shutdown',
    session_creation_failed: 'terminate:session_creation_failed',
    worktree_missing: 'terminate:missing_worktree_dir',
    worktree_failed: 'terminate:worktree_failed',
    budget_reached: 'terminate:budget_reached',
  },
};

function summary(t: Transition): string {
  if (t.kind === 'ignore') return 'ignore';
  if (t.kind === 'terminate') return `terminate:${t.reason.kind}`;
  if (t.kind === 'run_checks') return `run_checks:${t.gate}`;
  return `${t.kind}:${t.to.phase}`;
}

describe('loop transition table: the verification gate (issue 13)', () => {
  const gated: LoopLimits = { ...limits, gate: { sectionChecks: [0, 2, 0], finalChecks: 3 } };
  const failed = 'check 1: node test.js (exited with code 1)';

  it('a clean audit of a section with Verify: lines runs them instead of checkpointing; a section without goes straight on', () => {
    const t = nextTransition(state('auditing'), handoff('auditor'), gated);
    assert.deepEqual(t, { kind: 'run_checks', event: 'audit_clean', gate: 'section', sectionIndex: 1 });
    assert.equal(summary(nextTransition(state('auditing', { sectionIndex: 0 }), handoff('auditor'), gated)), 'advance:coding', 'section 1 has no checks');
    assert.equal(summary(nextTransition(state('auditing'), handoff('auditor', { openBugsInSection: 1 }), gated)), 'advance:coding', 'a dirty audit never reaches the gate');
  });

  it('checks_passed at a section makes its checkpoint and moves on; checks_failed sends the coder back to the same section', () => {
    const passed = nextTransition(state('auditing'), { type: 'checks_passed', gate: 'section' }, gated);
    assert.equal(passed.kind, 'advance');
    if (passed.kind !== 'advance') return;
    assert.deepEqual([passed.event, passed.to.phase, passed.to.sectionIndex, passed.to.iteration], ['checks_passed', 'coding', 2, 5]);
    assert.deepEqual(passed.effects, [{ type: 'complete_section', index: 1 }, { type: 'start_section', index: 2 }]);
    const last = nextTransition(state('auditing', { sectionIndex: 2 }), { type: 'checks_passed', gate: 'section' }, gated);
    assert.equal(summary(last), 'advance:final_auditing');
    const back = nextTransition(state('auditing'), { type: 'checks_failed', gate: 'section', failed }, gated);
    assert.equal(back.kind, 'advance');
    if (back.kind !== 'advance') return;
    assert.deepEqual([back.event, back.to.phase, back.to.sectionIndex, back.to.iteration], ['checks_failed', 'coding', 1, 5]);
    assert.deepEqual(back.effects, [{ type: 'start_section', index: 1 }], 'no checkpoint');
  });

  it('a clean final audit runs every check before completing; passed completes (or runs the post action), failed goes to final_audit_fix', () => {
    assert.deepEqual(nextTransition(state('final_auditing'), handoff('auditor'), gated), { kind: 'run_checks', event: 'final_audit_clean', gate: 'final', sectionIndex: 1 });
    assert.equal(summary(nextTransition(state('final_auditing'), handoff('auditor', { openBugs: 1 }), gated)), 'advance:final_audit_fix');
    const done = nextTransition(state('final_auditing'), { type: 'checks_passed', gate: 'final' }, gated);
    assert.deepEqual([summary(done), done.kind === 'terminate' && done.event], ['terminate:completed', 'checks_passed']);
    assert.equal(summary(nextTransition(state('final_auditing'), { type: 'checks_passed', gate: 'final' }, { ...gated, postAction: true })), 'advance:post_action');
    const fix = nextTransition(state('final_auditing'), { type: 'checks_failed', gate: 'final', failed }, gated);
    assert.deepEqual([summary(fix), fix.kind === 'advance' && fix.event], ['advance:final_audit_fix', 'checks_failed']);
  });

  it('a goal with a contract: an audit with no open findings runs it; passed completes, failed goes back to coding', () => {
    const goal = { ...initialState('goal', 0), phase: 'auditing' } as LoopState;
    const withContract: LoopLimits = { ...limits, gate: { sectionChecks: [], finalChecks: 2 } };
    assert.deepEqual(nextTransition(goal, handoff('auditor'), withContract), { kind: 'run_checks', event: 'audit_clean', gate: 'final', sectionIndex: null });
    assert.equal(summary(nextTransition(goal, handoff('auditor'), limits)), 'terminate:completed', 'no contract: as before');
    assert.equal(summary(nextTransition(goal, { type: 'checks_passed', gate: 'final' }, withContract)), 'terminate:completed');
    assert.equal(summary(nextTransition(goal, { type: 'checks_failed', gate: 'final', failed }, withContract)), 'advance:coding');
  });

  it('max_iterations ends a loop whose checks never pass, and the reason names the check', () => {
    const t = nextTransition(state('final_auditing', { iteration: 15 }), { type: 'checks_failed', gate: 'final', failed }, gated);
    assert.equal(t.kind, 'terminate');
    if (t.kind !== 'terminate') return;
    assert.deepEqual(t.reason, { kind: 'max_iterations', message: `check failed: ${failed}` });
    assert.equal(terminationReasonToString(t.reason), `max_iterations: check failed: ${failed}`);
    assert.deepEqual(parseTerminationReason(terminationReasonToString(t.reason)), t.reason);
    assert.deepEqual(parseTerminationReason('max_iterations'), { kind: 'max_iterations' });
  });

  it('a check result arriving where no gate is (a stale one) is ignored, never moves the loop', () => {
    for (const phase of ['coding', 'final_audit_fix', 'post_action'] as const) {
      assert.equal(nextTransition(state(phase), { type: 'checks_passed', gate: 'final' }, gated).kind, 'ignore');
    }
    assert.equal(nextTransition(state('final_auditing'), { type: 'checks_passed', gate: 'section' }, gated).kind, 'ignore');
  });
});

describe('loop transition table', () => {
  it('covers every phase × event pair', () => {
    assert.deepEqual(Object.keys(expected).sort(), [...PHASES].sort());
    for (const phase of PHASES) {
      for (const type of LOOP_EVENT_TYPES) {
        const t = nextTransition(state(phase), eventOf(type, phase), limits);
        assert.equal(summary(t), expected[phase][type], `${phase} × ${type}`);
      }
    }
  });

  it('is pure: the input state is never mutated and equal inputs give equal outputs', () => {
    for (const phase of PHASES) {
      for (const type of LOOP_EVENT_TYPES) {
        const s = state(phase);
        const before = structuredClone(s);
        const a = nextTransition(s, eventOf(type, phase), limits);
        const b = nextTransition(s, eventOf(type, phase), limits);
        assert.deepEqual(s, before);
        assert.deepEqual(a, b);
      }
    }
  });

  it('ignores a handoff from the role the phase does not expect', () => {
    for (const phase of PHASES) {
      const wrong = phase === 'auditing' || phase === 'final_auditing' ? 'code' : 'auditor';
      const t = nextTransition(state(phase), handoff(wrong), limits);
      assert.equal(t.kind, 'ignore', phase);
    }
  });

  describe('sectioned plan', () => {
    it('first section coding → audit → dirty (section bug) → coding on the same section, one more iteration', () => {
      const s = state('auditing', { sectionIndex: 0, iteration: 1 });
      const t = nextTransition(s, handoff('auditor', { openBugsInSection: 1, openBugs: 1, openFindings: 1 }), limits);
      assert.equal(t.kind, 'advance');
      if (t.kind !== 'advance') return;
      assert.equal(t.event, 'audit_dirty');
      assert.equal(t.to.phase, 'coding');
      assert.equal(t.to.sectionIndex, 0);
      assert.equal(t.to.iteration, 2);
      assert.deepEqual(t.effects, [{ type: 'start_section', index: 0 }]);
    });

    it('a warning alone does not keep a section dirty', () => {
      const s = state('auditing', { sectionIndex: 0 });
      const t = nextTransition(s, handoff('auditor', { openFindings: 2 }), limits);
      assert.equal(t.kind === 'advance' && t.event, 'audit_clean');
    });

    it('bugs in other sections do not keep this section dirty', () => {
      const s = state('auditing', { sectionIndex: 0 });
      const t = nextTransition(s, handoff('auditor', { openBugs: 2, openFindings: 2 }), limits);
      assert.equal(t.kind === 'advance' && t.to.sectionIndex, 1);
    });

    it('clean audit completes the section (checkpoint) and starts the next one', () => {
      const s = state('auditing', { sectionIndex: 0, iteration: 2 });
      const t = nextTransition(s, handoff('auditor'), limits);
      assert.equal(t.kind, 'advance');
      if (t.kind !== 'advance') return;
      assert.equal(t.to.sectionIndex, 1);
      assert.equal(t.to.iteration, 3);
      assert.deepEqual(t.effects, [
        { type: 'complete_section', index: 0 },
        { type: 'start_section', index: 1 },
      ]);
    });

    it('clean audit of the last section goes to the final audit', () => {
      const s = state('auditing', { sectionIndex: 2 });
      const t = nextTransition(s, handoff('auditor'), limits);
      assert.equal(summary(t), 'advance:final_auditing');
      assert.deepEqual(t.kind === 'advance' && t.effects, [{ type: 'complete_section', index: 2 }]);
    });

    it('a section added by plan_adjust during the last section\'s audit is coded next, not skipped (issue 28)', () => {
      const s = state('auditing', { sectionIndex: 2, sectionCount: 3, iteration: 4 });
      const t = nextTransition(s, handoff('auditor', { sections: { count: 4, firstPending: 3 } }), limits);
      assert.equal(summary(t), 'advance:coding');
      assert.equal(t.kind === 'advance' && t.to.sectionIndex, 3);
      assert.equal(t.kind === 'advance' && t.to.sectionCount, 4);
      assert.deepEqual(t.kind === 'advance' && t.effects, [
        { type: 'complete_section', index: 2 },
        { type: 'start_section', index: 3 },
      ]);
      // Removed pending sections shrink the plan: the last one left goes to the final audit.
      const shrunk = nextTransition(state('auditing', { sectionIndex: 1 }), handoff('auditor', { sections: { count: 2, firstPending: null } }), limits);
      assert.equal(summary(shrunk), 'advance:final_auditing');
    });

    it('a loop never completes with a pending section: a clean final audit codes it first (issue 28)', () => {
      const s = state('final_auditing', { sectionIndex: 2, iteration: 5 });
      const t = nextTransition(s, handoff('auditor', { sections: { count: 4, firstPending: 3 } }), { ...limits, gate: { sectionChecks: [], finalChecks: 1 } });
      assert.equal(summary(t), 'advance:coding');
      assert.equal(t.kind === 'advance' && t.to.sectionIndex, 3);
      assert.equal(t.kind === 'advance' && t.event, 'section_pending');
      assert.equal(summary(nextTransition(s, handoff('auditor', { sections: { count: 3, firstPending: null } }), limits)), 'terminate:completed');
    });

    it('final audit with an open bug anywhere → final_audit_fix, then back to final audit', () => {
      const s = state('final_auditing', { sectionIndex: 2, iteration: 5 });
      const t = nextTransition(s, handoff('auditor', { openBugs: 1, openFindings: 1 }), limits);
      assert.equal(summary(t), 'advance:final_audit_fix');
      assert.equal(t.kind === 'advance' && t.to.iteration, 6);
      const back = nextTransition((t as { to: LoopState }).to, handoff('code'), limits);
      assert.equal(summary(back), 'advance:final_auditing');
    });

    it('final audit with only warnings completes', () => {
      const t = nextTransition(state('final_auditing'), handoff('auditor', { openFindings: 3 }), limits);
      assert.equal(summary(t), 'terminate:completed');
    });

    it('a clean final audit goes to post_action when configured, which completes on its handoff', () => {
      const withPost = { ...limits, postAction: true };
      const t = nextTransition(state('final_auditing'), handoff('auditor'), withPost);
      assert.equal(summary(t), 'advance:post_action');
      const done = nextTransition((t as { to: LoopState }).to, handoff('code'), withPost);
      assert.equal(summary(done), 'terminate:completed');
    });
  });

  describe('unsectioned plan and goal', () => {
    it('unsectioned plan: any open finding keeps the audit dirty; none → final audit', () => {
      const s = { ...initialState('plan', 0), phase: 'auditing' } as LoopState;
      assert.equal(s.sectionIndex, null);
      assert.equal(summary(nextTransition(s, handoff('auditor', { openFindings: 1 }), limits)), 'advance:coding');
      assert.equal(summary(nextTransition(s, handoff('auditor'), limits)), 'advance:final_auditing');
    });

    it('goal: completes after an audit with no open finding at all, no final audit', () => {
      const s = { ...initialState('goal', 5), phase: 'auditing' } as LoopState;
      assert.equal(s.sectionCount, 0);
      assert.equal(summary(nextTransition(s, handoff('auditor', { openFindings: 1 }), limits)), 'advance:coding');
      assert.equal(summary(nextTransition(s, handoff('auditor'), limits)), 'terminate:completed');
    });
  });

  describe('iteration cap', () => {
    it('ends with max_iterations instead of starting a coding pass past the cap', () => {
      const capped = { ...limits, maxIterations: 3 };
      const s = state('auditing', { sectionIndex: 0, iteration: 3 });
      const t = nextTransition(s, handoff('auditor', { openBugsInSection: 1, openBugs: 1, openFindings: 1 }), capped);
      assert.equal(summary(t), 'terminate:max_iterations');
    });

    it('0 means unlimited', () => {
      const s = state('auditing', { sectionIndex: 0, iteration: 10_000 });
      const t = nextTransition(s, handoff('auditor', { openBugsInSection: 1 }), { ...limits, maxIterations: 0 });
      assert.equal(summary(t), 'advance:coding');
    });

    it('a completed section still checkpoints when the cap ends the loop', () => {
      const s = state('auditing', { sectionIndex: 0, iteration: 2 });
      const t = nextTransition(s, handoff('auditor'), { ...limits, maxIterations: 2 });
      assert.equal(summary(t), 'terminate:max_iterations');
      assert.deepEqual(t.kind === 'terminate' && t.effects, [{ type: 'complete_section', index: 0 }]);
    });
  });

  describe('watchdog and errors', () => {
    it('stalls re-trigger until maxConsecutiveStalls, then stall_timeout', () => {
      let s = state('coding');
      for (let i = 1; i < limits.maxConsecutiveStalls; i++) {
        const t = nextTransition(s, { type: 'stall' }, limits);
        assert.equal(summary(t), 'retrigger:coding');
        s = (t as { to: LoopState }).to;
        assert.equal(s.consecutiveStalls, i);
      }
      assert.equal(summary(nextTransition(s, { type: 'stall' }, limits)), 'terminate:stall_timeout');
    });

    it('a phase change resets the stall and error budgets', () => {
      const s = state('coding', { consecutiveStalls: 4, modelErrors: 2, missedHandoffs: 1 });
      const t = nextTransition(s, handoff('code'), limits);
      assert.equal(t.kind === 'advance' && t.to.consecutiveStalls, 0);
      assert.equal(t.kind === 'advance' && t.to.modelErrors, 0);
      assert.equal(t.kind === 'advance' && t.to.missedHandoffs, 0);
    });

    it('model errors retry with back-off, then error_max_retries with the message', () => {
      let s = state('coding');
      for (let i = 1; i <= limits.maxModelRetries; i++) {
        const t = nextTransition(s, { type: 'model_error', message: 'HTTP 500' }, limits);
        assert.equal(t.kind, 'retrigger');
        assert.equal(t.kind === 'retrigger' && t.delayMs, retryDelayMs(i));
        s = (t as { to: LoopState }).to;
      }
      const end = nextTransition(s, { type: 'model_error', message: 'HTTP 500' }, limits);
      assert.deepEqual(end.kind === 'terminate' && end.reason, { kind: 'error_max_retries', message: 'HTTP 500' });
    });

    it('a malformed model stream retries like any model error, then ends with model_stream_malformed', () => {
      let s = state('auditing');
      for (let i = 1; i <= limits.maxModelRetries; i++) {
        const t = nextTransition(s, { type: 'model_error', message: 'broken', malformed: true }, limits);
        assert.equal(t.kind, 'retrigger');
        s = (t as { to: LoopState }).to;
      }
      const end = nextTransition(s, { type: 'model_error', message: 'broken', malformed: true }, limits);
      assert.deepEqual(end.kind === 'terminate' && end.reason, { kind: 'model_stream_malformed', message: 'broken' });
      assert.equal(terminationStatusFor({ kind: 'model_stream_malformed', message: 'broken' }), 'errored');
      assert.deepEqual(parseTerminationReason('model_stream_malformed: broken'), { kind: 'model_stream_malformed', message: 'broken' });
    });

    it('back-off doubles from 2 s and stays at most 30 s', () => {
      assert.deepEqual([1, 2, 3, 4, 5, 9].map(retryDelayMs), [2000, 4000, 8000, 16000, 30000, 30000]);
    });

    it('the auditor falls back through its model chain before giving up', () => {
      const chain = { ...limits, auditorFallbackModels: ['p/a', 'p/b'] };
      let s = state('auditing');
      let t = nextTransition(s, { type: 'model_retries_exhausted', message: 'overloaded' }, chain);
      assert.equal(t.kind === 'retrigger' && t.event, 'auditor_fallback');
      s = (t as { to: LoopState }).to;
      assert.equal(s.auditorModelIndex, 0);
      t = nextTransition(s, { type: 'model_retries_exhausted', message: 'overloaded' }, chain);
      s = (t as { to: LoopState }).to;
      assert.equal(s.auditorModelIndex, 1);
      t = nextTransition(s, { type: 'model_retries_exhausted', message: 'overloaded' }, chain);
      assert.equal(summary(t), 'terminate:error_max_retries');
    });

    it('the coder has no fallback chain', () => {
      const chain = { ...limits, auditorFallbackModels: ['p/a'] };
      const t = nextTransition(state('coding'), { type: 'model_retries_exhausted', message: 'x' }, chain);
      assert.equal(summary(t), 'terminate:error_max_retries');
    });

    it('an idle without handoff is reminded once, then counted as an error, then ends per phase', () => {
      const reasons: Record<Phase, string> = {
        coding: 'coding_no_assistant',
        auditing: 'audit_retry_exhausted',
        final_auditing: 'final_audit_retry_exhausted',
        final_audit_fix: 'coding_no_assistant',
        post_action: 'coding_no_assistant',
      };
      for (const phase of PHASES) {
        let s = state(phase);
        let retriggers = 0;
        for (;;) {
          const t = nextTransition(s, { type: 'idle_without_handoff' }, limits);
          if (t.kind === 'terminate') {
            assert.equal(t.reason.kind, reasons[phase]);
            break;
          }
          if (t.kind === 'retrigger') retriggers++;
          assert.ok(t.kind === 'remind_handoff' || t.kind === 'retrigger', `${phase}: ${t.kind}`);
          s = t.to;
        }
        assert.equal(retriggers, limits.maxModelRetries, phase);
      }
    });
  });

  it('restart keeps the iteration (it never goes back), resets the error budgets, keeps phase and section', () => {
    const s = state('auditing', { iteration: 9, modelErrors: 3, consecutiveStalls: 2, missedHandoffs: 1, auditorModelIndex: 0 });
    const r = restartState(s);
    assert.equal(r.phase, 'auditing');
    assert.equal(r.sectionIndex, 1);
    assert.equal(r.iteration, 9);
    assert.equal(r.modelErrors + r.consecutiveStalls + r.missedHandoffs, 0);
    assert.equal(r.auditorModelIndex, -1);
  });

  it('a restart gives a fresh iteration budget counted from the restarted iteration', () => {
    const capped = { ...limits, maxIterations: 3 };
    // Ended at the cap (iteration 3 of 3), restarted: iterations 4 and 5 may run, 6 may not.
    let s = restartState(state('auditing', { iteration: 3, sectionIndex: 0 }));
    assert.equal(iterationCap(s, capped), 5);
    for (const expected of [4, 5]) {
      const t = nextTransition(s, handoff('auditor', { openBugsInSection: 1 }), capped);
      assert.equal(summary(t), 'advance:coding');
      s = (t as Extract<Transition, { kind: 'advance' }>).to;
      assert.equal(s.iteration, expected);
      s = { ...s, phase: 'auditing' } as LoopState;
    }
    assert.equal(summary(nextTransition(s, handoff('auditor', { openBugsInSection: 1 }), capped)), 'terminate:max_iterations');
    // Restarted twice: the budget counts from the last restart.
    const again = restartState(s);
    assert.equal(again.iteration, 5);
    assert.equal(iterationCap(again, capped), 7);
    assert.equal(iterationCap(again, { maxIterations: 0 }), 0, 'unlimited stays unlimited');
    assert.equal(iterationCap(state('coding', { iteration: 1 }), capped), 3, 'a loop never restarted: the cap itself');
  });
});
