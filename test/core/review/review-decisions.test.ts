/**
 * The user's review (issue 29), its pure parts: where a comment points and what it may say, what
 * settling one means, the completion gate of the transition table, the review passes' states, and
 * the user's comments in the coder's prompts (in full, verbatim).
 */
import { strict as assert } from 'node:assert';
import { afterSettling, commentPath, commentSeverity, commentText, MAX_COMMENT_CHARS, parseCommentTarget, sendProblem, userFindingFingerprint } from '../../../src/core/review/review-decisions';
import { initialState, type LoopLimits, type LoopState } from '../../../src/core/loop/state';
import { nextTransition, reviewPassState, userReviewGate, type Transition } from '../../../src/core/loop/transitions';
import { AGENT_TOOL, buildCodingPrompt, buildFinalAuditFixPrompt, buildFinalAuditPrompt, userReviewSection, type PromptContext, type PromptFinding } from '../../../src/core/loop/prompts';

const limits: LoopLimits = { maxIterations: 15, maxConsecutiveStalls: 5, maxModelRetries: 3, auditorFallbackModels: [], postAction: false };
const plan = (over: Partial<LoopState> = {}) => ({ ...initialState('plan', 2), phase: 'final_auditing', sectionIndex: 1, iteration: 5, ...over }) as LoopState;
const goal = (over: Partial<LoopState> = {}) => ({ ...initialState('goal', 0), phase: 'auditing', iteration: 3, ...over }) as LoopState;
const clean = { type: 'handoff', role: 'auditor', openBugsInSection: 0, openBugs: 0, openFindings: 0 } as const;
const summary = (t: Transition) => (t.kind === 'terminate' ? `terminate:${t.reason.kind}` : t.kind === 'advance' || t.kind === 'retrigger' ? `${t.kind}:${t.to.phase}:${t.to.iteration}` : t.kind);

describe('the user review: pure decisions', () => {
  it('parses FILE:LINE and FILE:LINE-END, refusing what is not one', () => {
    assert.deepEqual(parseCommentTarget('src/a.ts:12'), { ok: true, value: { file: 'src/a.ts', line: 12, lineEnd: null } });
    assert.deepEqual(parseCommentTarget(' src/a b.ts:3-9 '), { ok: true, value: { file: 'src/a b.ts', line: 3, lineEnd: 9 } });
    assert.deepEqual(parseCommentTarget('c:/x.ts:4-4'), { ok: true, value: { file: 'c:/x.ts', line: 4, lineEnd: null } });
    for (const bad of ['src/a.ts', 'src/a.ts:0', 'src/a.ts:9-3', ':4', 'a.ts:x']) assert.equal(parseCommentTarget(bad).ok, false, bad);
  });

  it("keeps a comment's file inside the loop's worktree", () => {
    assert.deepEqual(commentPath('/w/loop', 'src/./a.ts'), { ok: true, value: 'src/a.ts' });
    assert.deepEqual(commentPath('/w/loop', '/w/loop/src/a.ts'), { ok: true, value: 'src/a.ts' });
    for (const bad of ['../x.ts', '/etc/passwd', '/w/loop', '', 'a\u202e.ts', 'src/../../x']) assert.equal(commentPath('/w/loop', bad).ok, false, bad);
  });

  it('stores the text verbatim; refuses an empty or an unbounded one; severity bug by default', () => {
    assert.deepEqual(commentText('  keep  "these"\nspaces '), { ok: true, value: '  keep  "these"\nspaces ' });
    assert.equal(commentText(' \n ').ok, false);
    assert.equal(commentText('x'.repeat(MAX_COMMENT_CHARS + 1)).ok, false);
    assert.deepEqual(commentSeverity(undefined), { ok: true, value: 'bug' });
    assert.deepEqual(commentSeverity('Warning'), { ok: true, value: 'warning' });
    assert.equal(commentSeverity('nit').ok, false);
    assert.notEqual(userFindingFingerprint(), userFindingFingerprint(), 'every comment is its own finding');
  });

  it('settling: the last open comment of a loop awaiting review completes it; otherwise it waits, or nothing', () => {
    assert.equal(afterSettling('awaiting_review', 0), 'complete');
    assert.equal(afterSettling('awaiting_review', 2), 'wait');
    for (const s of ['completed', 'running', 'paused', 'errored']) assert.equal(afterSettling(s, 0), 'none', s);
    assert.match(sendProblem('l', 'running', 1)!, /running/);
    assert.match(sendProblem('l', 'completed', 0)!, /no open comment/);
    assert.equal(sendProblem('l', 'completed', 1), null);
    assert.equal(sendProblem('l', 'paused', 1), null);
  });
});

describe("the user review: the transition table's completion gate", () => {
  const completing = (s: LoopState) => nextTransition(s, clean, limits);

  it('passes every transition while no comment of the user is open', () => {
    for (const s of [plan(), goal()]) {
      const t = completing(s);
      assert.equal(userReviewGate(t, s, { open: 0, unanswered: 0 }, limits), t);
    }
    const dirty = nextTransition(plan(), { ...clean, openBugs: 1, openFindings: 1 }, limits);
    assert.equal(userReviewGate(dirty, plan(), { open: 3, unanswered: 3 }, limits), dirty, 'not a completion: unchanged');
    const cancel = nextTransition(plan(), { type: 'cancel' }, limits);
    assert.equal(userReviewGate(cancel, plan(), { open: 1, unanswered: 1 }, limits), cancel);
  });

  it('an unanswered comment sends a completing loop back to coding; all answered: awaiting_review', () => {
    assert.equal(summary(userReviewGate(completing(plan()), plan(), { open: 2, unanswered: 1 }, limits)), 'advance:final_audit_fix:6');
    assert.equal(summary(userReviewGate(completing(goal()), goal(), { open: 1, unanswered: 1 }, limits)), 'advance:coding:4');
    assert.equal(summary(userReviewGate(completing(plan()), plan(), { open: 2, unanswered: 0 }, limits)), 'terminate:awaiting_review');
    const post = nextTransition(plan(), clean, { ...limits, postAction: true });
    assert.equal(summary(post), 'advance:post_action:5');
    assert.equal(summary(userReviewGate(post, plan(), { open: 1, unanswered: 0 }, limits)), 'terminate:awaiting_review', 'no post action before the review is settled');
    const capped = userReviewGate(completing(goal({ iteration: 15 })), goal({ iteration: 15 }), { open: 1, unanswered: 1 }, limits);
    assert.equal(summary(capped), 'terminate:max_iterations', 'the iteration cap still holds');
  });

  it('review passes: send codes again one iteration on; final re-runs the final gate', () => {
    const done = plan({ phase: 'final_auditing', iteration: 5 });
    assert.deepEqual([reviewPassState(done, 'send').phase, reviewPassState(done, 'send').iteration], ['final_audit_fix', 6]);
    assert.deepEqual([reviewPassState(done, 'final').phase, reviewPassState(done, 'final').iteration], ['final_auditing', 5]);
    assert.deepEqual([reviewPassState(goal(), 'send').phase, reviewPassState(goal(), 'final').phase], ['coding', 'auditing']);
    assert.equal(reviewPassState(done, 'send').iterationsBeforeRestart, 5, 'a fresh iteration budget');
  });
});

describe("the user review: the coder's prompt", () => {
  const text = 'Rename `x` to `count` — and "keep" the  two spaces.\nSecond line.';
  const user = (over: Partial<PromptFinding> = {}): PromptFinding => ({ id: 4, file: 'src/a.ts', line: 3, lineEnd: 7, severity: 'bug', description: text, scenario: null, occurrences: 1, sectionIndex: null, source: 'user', ...over });
  const audit: PromptFinding = { id: 5, file: 'src/b.ts', line: 1, severity: 'bug', description: 'Off by one.', scenario: null, occurrences: 1, sectionIndex: null };
  const ctx = (state: Partial<LoopState>, openFindings: PromptFinding[]): PromptContext => ({
    loopName: 'l',
    state: { ...initialState('plan', 0), ...state } as LoopState,
    title: 'T',
    planText: '# T\ndo it',
    goal: null,
    objective: null,
    verification: null,
    sections: [],
    openFindings,
    lastCoderHandoff: null,
    postAction: null,
    worktreeDir: '/w',
    baseCommit: 'abc',
    branch: 'forge/l',
  });

  it('carries each open comment in full, verbatim, with its range, the earlier answer and how to answer', () => {
    assert.equal(userReviewSection([audit]), '');
    const section = userReviewSection([user(), user({ id: 9, line: 2, lineEnd: null, severity: 'warning', reply: 'Renamed it.' }), audit]);
    assert.ok(section.includes(`### User comment #4 — BUG — src/a.ts:3-7\n\n${text}`), section);
    assert.ok(section.includes('### User comment #9 — WARNING — src/a.ts:2\n'), section);
    assert.ok(section.includes('Your earlier answer: Renamed it.'));
    assert.ok(section.includes(AGENT_TOOL.reviewReply));
    assert.match(section, /^## The user's review \(2 open comments\)/);
    assert.ok(!section.includes('Off by one.'), "the auditor's findings are not the user's");
  });

  it('the coding and final-fix prompts carry the comment and the auditor findings apart; the auditor is told it cannot close them', () => {
    for (const prompt of [buildCodingPrompt(ctx({ phase: 'coding' }, [user(), audit])), buildFinalAuditFixPrompt(ctx({ phase: 'final_audit_fix' }, [user(), audit]))]) {
      assert.ok(prompt.includes(text));
      assert.equal(prompt.split(text).length, 2, 'once');
      assert.match(prompt, /### Finding #5 — BUG — src\/b\.ts:1/);
      assert.doesNotMatch(prompt, /### Finding #4/);
    }
    assert.match(buildFinalAuditPrompt(ctx({ phase: 'final_auditing' }, [user()])), /Nor are the user's review comments: only the user closes them/);
  });
});
