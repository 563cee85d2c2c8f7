import { strict as assert } from 'node:assert';
import { initialState, type LoopState } from '../../../src/core/loop/state';
import {
  AGENT_TOOL,
  buildAuditPrompt,
  buildCodingPrompt,
  buildFinalAuditPrompt,
  buildHandoffReminder,
  buildPhasePrompt,
  buildUserMessage,
  type PromptContext,
  type PromptFinding,
} from '../../../src/core/loop/prompts';
import { userWordsIn } from '../../../src/core/loop/user-message';

const finding = (over: Partial<PromptFinding> = {}): PromptFinding => ({
  id: 7,
  file: 'src/greet.js',
  line: 12,
  severity: 'bug',
  description: 'greet() ignores the name argument and always prints "hello world".',
  scenario: 'node cli.js bob prints "hello world" instead of "hello bob".',
  occurrences: 1,
  sectionIndex: 0,
  ...over,
});

function ctx(state: Partial<LoopState>, over: Partial<PromptContext> = {}): PromptContext {
  return {
    loopName: 'greeting',
    state: { ...initialState('plan', 2), ...state } as LoopState,
    title: 'Greeting',
    planText: '# Greeting\n## Parse\nparse args\n## Print\nprint it',
    goal: null,
    objective: null,
    verification: 'node cli.js bob prints hello bob',
    sections: [
      { index: 0, title: 'Parse', body: 'parse args', status: 'in_progress' },
      { index: 1, title: 'Print', body: 'print it', status: 'pending' },
    ],
    openFindings: [],
    lastCoderHandoff: null,
    postAction: null,
    worktreeDir: '/data/worktrees/greeting',
    baseCommit: 'abc123',
    branch: 'forge/greeting',
    ...over,
  };
}

describe('prompt builders', () => {
  it('the coder prompt names the current section and the handoff tool', () => {
    const p = buildCodingPrompt(ctx({}));
    assert.match(p, /section 1 of 2 — Parse/);
    assert.match(p, /parse args/);
    assert.ok(p.includes(AGENT_TOOL.handoff));
    assert.ok(!p.includes('Open review findings'));
  });

  it('every open finding of the section is inlined in full, with file, line, severity and scenario', () => {
    const f1 = finding();
    const f2 = finding({ id: 8, severity: 'warning', line: null, file: 'README.md', description: 'Usage is undocumented.', scenario: null });
    const other = finding({ id: 9, sectionIndex: 1, description: 'belongs to section 2' });
    const p = buildCodingPrompt(ctx({ iteration: 2 }, { openFindings: [f1, f2, other] }));
    assert.ok(p.includes(f1.description));
    assert.ok(p.includes(f1.scenario!));
    assert.ok(p.includes('BUG — src/greet.js:12'));
    assert.ok(p.includes('WARNING — README.md'));
    assert.ok(p.includes('Finding #7'));
    assert.ok(!p.includes('belongs to section 2'), 'findings of other sections stay out');
  });

  it('a finding raised three times is flagged as recurring for coder and auditor', () => {
    const f = finding({ occurrences: 3 });
    assert.match(buildCodingPrompt(ctx({}, { openFindings: [f] })), /RECURRING: this finding has come back 3 times/);
    assert.match(buildAuditPrompt(ctx({ phase: 'auditing' }, { openFindings: [f] })), /RECURRING/);
    assert.doesNotMatch(buildCodingPrompt(ctx({}, { openFindings: [finding({ occurrences: 2 })] })), /RECURRING/);
  });

  it('the audit prompt carries the coder handoff notes and the review tools', () => {
    const p = buildAuditPrompt(
      ctx({ phase: 'auditing' }, { lastCoderHandoff: { decisions: 'used yargs', verification: 'ran tests', notesForAuditor: 'check flags' } }),
    );
    assert.match(p, /Decisions: used yargs/);
    assert.match(p, /Notes for you: check flags/);
    for (const t of [AGENT_TOOL.reviewWrite, AGENT_TOOL.reviewDelete, AGENT_TOOL.handoff, AGENT_TOOL.planAdjust]) assert.ok(p.includes(t), t);
    assert.match(p, /base commit abc123/);
  });

  it('the final audit lists every open finding and asks for the verification', () => {
    const p = buildFinalAuditPrompt(ctx({ phase: 'final_auditing', sectionIndex: 1 }, { openFindings: [finding({ sectionIndex: 1 })] }));
    assert.match(p, /final audit/);
    assert.match(p, /Findings still open/);
    assert.match(p, /verification part/);
  });

  it('goal prompts speak of the goal, not sections', () => {
    const p = buildPhasePrompt(ctx({ ...initialState('goal', 0) }, { goal: 'Make npm test pass', planText: null, sections: [], verification: null }));
    assert.match(p, /## Goal\n\nMake npm test pass/);
    assert.doesNotMatch(p, /## Sections/);
  });

  it('buildPhasePrompt dispatches by phase', () => {
    assert.match(buildPhasePrompt(ctx({ phase: 'final_audit_fix' }, { openFindings: [finding()] })), /fixing the final audit/);
    assert.match(buildPhasePrompt(ctx({ phase: 'post_action' }, { postAction: 'Update CHANGELOG.md' })), /Update CHANGELOG\.md/);
  });

  it('the handoff reminder names the tool', () => {
    assert.ok(buildHandoffReminder({ state: initialState('plan', 1) }).includes(AGENT_TOOL.handoff));
  });

  it("the user's queued messages (forge tell) follow every phase's prompt verbatim, oldest first; none adds nothing", () => {
    const words = 'Use the parser in src/args.js — not a new one.\n\nAlso: keep `--help` as is.';
    for (const phase of ['coding', 'auditing', 'final_auditing', 'final_audit_fix', 'post_action'] as const) {
      const without = buildPhasePrompt(ctx({ phase }, { postAction: 'tag it' }));
      assert.equal(buildPhasePrompt(ctx({ phase }, { postAction: 'tag it', userMessages: [] })), without, phase);
      assert.doesNotMatch(without, /Message from the user/, phase);
      const one = buildPhasePrompt(ctx({ phase }, { postAction: 'tag it', userMessages: [words] }));
      assert.ok(one.startsWith(without), `${phase}: the phase's own prompt comes first`);
      assert.match(one.slice(without.length), /^\n\n## Message from the user \(via forge tell\)\n/, phase);
      assert.ok(one.endsWith(`\n${words}`), `${phase}: the words verbatim, last`);
    }
    const two = buildPhasePrompt(ctx({}, { userMessages: ['first', 'second'] }));
    assert.match(two, /## Messages from the user \(via forge tell\), oldest first \(2\)/);
    assert.ok(two.indexOf('\nfirst\n') < two.indexOf('\nsecond'), 'oldest first');
  });

  it("a message into a running session is framed as the user's, with the words verbatim", () => {
    const m = buildUserMessage('stop touching README.md');
    assert.match(m, /^Message from the user \(via forge tell\):\n\nstop touching README\.md\n\n/);
  });

  it("the live view finds the user's words again in either prompt, and none in Forge's own", () => {
    const words = 'keep it small\n\nreally';
    assert.equal(userWordsIn(buildUserMessage(words)), words);
    assert.equal(userWordsIn(buildPhasePrompt(ctx({}, { userMessages: [words] }))), words);
    assert.equal(userWordsIn(buildPhasePrompt(ctx({}))), null);
    assert.equal(userWordsIn(buildHandoffReminder({ state: initialState('plan', 1) })), null);
  });
});
