import { strict as assert } from 'node:assert';
import { checksForFinal, checksForSection, goalChecks, loopGate, planChecks } from '../../../src/core/loop/loop-checks';

describe("a loop's checks, chosen per gate (pure)", () => {
  const plan = {
    verification: '```sh\nnpm test\n```\n- exists: README.md\nPlain prose is not a check.',
    sections: [
      { index: 0, body: 'Write a.ts.\nVerify: `node a.js`' },
      { index: 1, body: 'Nothing to verify here.\n```sh\nrm -rf /\n```' },
      { index: 2, body: 'Verify: exists: b.ts\nVerify: contains: b.ts: export' },
    ],
  };

  it('a plan: its Verification part, then each section in order; a section body\'s code is not a check', () => {
    const c = planChecks(plan);
    assert.equal(c.problems, null);
    assert.deepEqual(c.checks.map((s) => s.id), ['plan-1', 'plan-2', 'section-1-1', 'section-3-1', 'section-3-2']);
  });

  it('the section gate runs that section\'s Verify: lines; the final gate runs every check; the table learns the counts', () => {
    const { checks } = planChecks(plan);
    assert.deepEqual(checksForSection(checks, 0).map((s) => s.id), ['section-1-1']);
    assert.deepEqual(checksForSection(checks, 1), []);
    assert.deepEqual(checksForFinal(checks).map((s) => s.id), checks.map((s) => s.id));
    assert.deepEqual(loopGate(checks, 3), { sectionChecks: [1, 0, 2], finalChecks: 5 });
    assert.deepEqual(loopGate([], 2), { sectionChecks: [0, 0], finalChecks: 0 });
  });

  it('problems of every part in one message, naming the part, ending with what to do', () => {
    const c = planChecks({ verification: '```sh\n\n```', sections: [{ index: 0, body: 'Verify: exists: /etc/passwd' }] });
    assert.match(c.problems ?? '', /^The plan's Verification part has a check Forge cannot run:\n- .+\nSection 1 of the plan has a check Forge cannot run:\n- .+\nFix the plan and start it again\.$/);
  });

  it('a goal: its options are its contract; none is no contract', () => {
    const c = goalChecks({ check: ['npm test'], contains: ['README.md:## Usage'] });
    assert.equal(c.problems, null);
    assert.deepEqual(c.checks.map((s) => [s.id, s.label]), [['goal-1', 'check 1: npm test'], ['goal-2', 'check 2: contains: README.md: "## Usage"']]);
    assert.deepEqual(goalChecks(undefined), { checks: [], notes: [], problems: null });
    assert.match(goalChecks({ matches: ['a.txt:/(/'] }).problems ?? '', /^The goal has a check Forge cannot run:\n- --matches "a\.txt:\/\(\/": .+\nFix the options and start the goal again\.$/);
  });
});
