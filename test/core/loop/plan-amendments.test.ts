import assert from 'node:assert/strict';
import { amendedSectionIndexes, describeAmendment, lineDiff, summariseChange } from '../../../src/core/loop/plan-amendments';

const s = (index: number, title: string, body: string, status = 'pending') => ({ index, title, body, status });

describe('plan amendments (pure)', () => {
  it('line diff: common lines once, removed before added, empty sides', () => {
    assert.deepEqual(lineDiff('a\nb\nc', 'a\nx\nc'), [
      { op: ' ', text: 'a' },
      { op: '-', text: 'b' },
      { op: '+', text: 'x' },
      { op: ' ', text: 'c' },
    ]);
    assert.deepEqual(lineDiff('', 'n'), [{ op: '+', text: 'n' }]);
    assert.deepEqual(lineDiff('o', ''), [{ op: '-', text: 'o' }]);
    assert.deepEqual(lineDiff('', ''), []);
    assert.deepEqual(lineDiff('same\ntext', 'same\ntext').map((d) => d.op), [' ', ' ']);
  });

  it('describes a revision of the audited section, with its diff, rationale, time and iteration', () => {
    const view = describeAmendment(
      {
        id: 7,
        at: 2_000,
        sectionIndex: 1,
        before: [s(0, 'Setup', 'do a', 'done'), s(1, 'Tests', 'write tests', 'in_progress')],
        after: [s(0, 'Setup', 'do a', 'done'), s(1, 'Tests', 'write tests\nwith a fixture', 'in_progress')],
        rationale: 'the tests need a fixture',
      },
      [
        { at: 1_000, iteration: 1 },
        { at: 1_500, iteration: 2 },
        { at: 3_000, iteration: 3 },
      ],
    );
    assert.equal(view.iteration, 2);
    assert.equal(view.auditedSection, 1);
    assert.equal(view.rationale, 'the tests need a fixture');
    assert.deepEqual(view.changes.map((c) => [c.kind, c.index, c.title]), [['revised', 1, 'Tests']]);
    assert.deepEqual(view.changes[0]!.diff, [
      { op: ' ', text: '## Tests' },
      { op: ' ', text: 'write tests' },
      { op: '+', text: 'with a fixture' },
    ]);
    assert.equal(summariseChange(view.changes[0]!), 'section 2 "Tests" revised (+1 −0 lines)');
  });

  it('pending sections replaced: renamed, added and removed ones, each with its diff', () => {
    const view = describeAmendment({
      id: 1,
      at: 1,
      sectionIndex: 0,
      before: [s(0, 'A', 'a'), s(1, 'B', 'b'), s(2, 'C', 'c')],
      after: [s(0, 'A', 'a'), s(1, 'B2', 'b')],
      rationale: 'r',
    });
    assert.deepEqual(view.changes.map((c) => [c.kind, c.index, c.title, c.previousTitle]), [
      ['revised', 1, 'B2', 'B'],
      ['removed', 2, 'C', undefined],
    ]);
    assert.equal(summariseChange(view.changes[0]!), 'section 2 "B2" (was "B") revised (+1 −1 lines)');
    const grown = describeAmendment({ id: 2, at: 1, sectionIndex: 0, before: [s(0, 'A', 'a')], after: [s(0, 'A', 'a'), s(1, 'New', '')], rationale: 'r' });
    assert.deepEqual(grown.changes.map((c) => [c.kind, c.diff]), [['added', [{ op: '+', text: '## New' }]]]);
    assert.equal(grown.iteration, null, 'no transitions: iteration unknown');
  });

  it('badges the sections amendments revised or added, counting each amendment', () => {
    const one = describeAmendment({ id: 1, at: 1, sectionIndex: 0, before: [s(0, 'A', 'a'), s(1, 'B', 'b')], after: [s(0, 'A', 'a2'), s(1, 'B', 'b')], rationale: 'r' });
    const two = describeAmendment({ id: 2, at: 2, sectionIndex: 0, before: [s(0, 'A', 'a2'), s(1, 'B', 'b')], after: [s(0, 'A', 'a3')], rationale: 'r' });
    assert.deepEqual([...amendedSectionIndexes([one, two])], [[0, 2]]);
  });

  it('tolerates stored values that are not section lists (old or damaged rows)', () => {
    const view = describeAmendment({ id: 1, at: 1, sectionIndex: null, before: null, after: { x: 1 }, rationale: '' });
    assert.deepEqual(view.changes, []);
  });
});
