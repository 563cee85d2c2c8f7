import assert from 'node:assert/strict';
import {
  NO_CHANGES,
  PATHS_NAMED,
  SUBJECT_MAX,
  describeChanges,
  loopTeardownMessage,
  sectionCheckpointMessage,
  stagedFromNameStatus,
  subjectOf,
  type StagedChanges,
} from '../../../src/core/workspace/checkpoint-message';

describe('workspace: checkpoint messages', () => {
  describe('subjectOf: a title or an objective as a subject line', () => {
    const cases: Array<[string, string]> = [
      ['Parser', 'Parser'],
      ['add the storage layer', 'Add the storage layer'],
      ['  Add   the\nstorage layer ', 'Add the storage layer'],
      ['2. Multiply', 'Multiply'],
      ['Section 3: Docs section', 'Docs section'],
      ['section 12 - tidy up', 'Tidy up'],
      ['**Add** `mul` to the calculator.', 'Add mul to the calculator'],
      ['- Build a CLI calculator. It must also divide.', 'Build a CLI calculator'],
      ['\n\n## Make npm test pass;\n\nmore text', 'Make npm test pass'],
      ['Make the CLI\nmultiply', 'Make the CLI multiply'],
      ['v1.2 support', 'V1.2 support'],
      ['', ''],
      ['   ', ''],
      ['2024 plan', '2024 plan'],
    ];
    for (const [input, expected] of cases) {
      it(`${JSON.stringify(input)} → ${JSON.stringify(expected)}`, () => assert.equal(subjectOf(input), expected));
    }
    it(`cuts a long line at a word, within ${SUBJECT_MAX} characters`, () => {
      const long = `Add ${'very '.repeat(30)}long things`;
      const s = subjectOf(long);
      assert.ok(s.length <= SUBJECT_MAX, s);
      assert.match(s, /^Add very( very)* very…$/);
      const word = subjectOf('x'.repeat(200));
      assert.equal(word.length, SUBJECT_MAX);
      assert.ok(word.endsWith('…'));
    });
  });

  describe('describeChanges', () => {
    const files = (n: number, prefix = 'f') => Array.from({ length: n }, (_, i) => `${prefix}${i + 1}.ts`);
    const cases: Array<[StagedChanges, string | null]> = [
      [NO_CHANGES, null],
      [{ changed: ['a.ts'], removed: [] }, 'Changes a.ts.'],
      [{ changed: ['a.ts', 'b.ts'], removed: [] }, 'Changes a.ts and b.ts.'],
      [{ changed: ['a.ts', 'b.ts', 'c.ts'], removed: [] }, 'Changes a.ts, b.ts and c.ts.'],
      [{ changed: [], removed: ['old.ts'] }, 'Removes old.ts.'],
      [{ changed: ['a.ts'], removed: ['old.ts', 'older.ts'] }, 'Changes a.ts; removes old.ts and older.ts.'],
      [{ changed: files(PATHS_NAMED), removed: [] }, `Changes ${files(PATHS_NAMED - 1).join(', ')} and f${PATHS_NAMED}.ts.`],
      [{ changed: files(PATHS_NAMED + 1), removed: [] }, `Changes ${files(PATHS_NAMED).join(', ')} and 1 more file.`],
      [{ changed: files(PATHS_NAMED + 5), removed: ['x.ts', 'y.ts'] }, `Changes ${files(PATHS_NAMED).join(', ')} and 5 more files; removes x.ts and 1 more file.`],
    ];
    for (const [changes, expected] of cases) {
      it(`${changes.changed.length} changed, ${changes.removed.length} removed → ${JSON.stringify(expected)}`, () => assert.equal(describeChanges(changes), expected));
    }
  });

  describe('sectionCheckpointMessage', () => {
    it('subject: the section title; body: the files, then the loop', () => {
      assert.equal(
        sectionCheckpointMessage({ number: 2, title: 'add multiply', loopName: 'calc-mul', changes: { changed: ['src/calc.js', 'test/calc.test.js'], removed: [] } }),
        'Add multiply\n\nChanges src/calc.js and test/calc.test.js.\n\nSection 2 of Forge loop calc-mul, approved by its auditor.\n',
      );
    });
    it('no files named (nothing listed): the loop paragraph alone', () => {
      assert.equal(sectionCheckpointMessage({ number: 1, title: 'Parser', loopName: 'p', changes: NO_CHANGES }), 'Parser\n\nSection 1 of Forge loop p, approved by its auditor.\n');
    });
    it('an empty title: the section number and loop', () => {
      for (const title of ['', '  ', '3.']) {
        assert.equal(sectionCheckpointMessage({ number: 3, title, loopName: 'p', changes: NO_CHANGES }).split('\n')[0], 'Section 3 of p');
      }
    });
  });

  describe('loopTeardownMessage', () => {
    const changes = { changed: ['README.md'], removed: [] };
    it('completed: the objective is the subject', () => {
      assert.equal(
        loopTeardownMessage({ loopName: 'calc-mul', reason: 'completed', iterations: 4, objective: 'The calculator multiplies. It keeps adding too.', sectionTitle: 'ignored', changes }),
        'The calculator multiplies\n\nChanges README.md.\n\nForge loop calc-mul completed after 4 iterations.\n',
      );
    });
    it('completed without an objective: the loop name; one iteration is singular', () => {
      assert.equal(loopTeardownMessage({ loopName: 'calc-mul', reason: 'completed', iterations: 1, objective: null, sectionTitle: null, changes: NO_CHANGES }), 'Complete calc-mul\n\nForge loop calc-mul completed after 1 iteration.\n');
    });
    it('unfinished: work in progress on the section it was on, and why it stopped', () => {
      assert.equal(
        loopTeardownMessage({ loopName: 'auth', reason: 'cancelled', iterations: 0, objective: 'Add login', sectionTitle: 'Session tokens', changes }),
        'Work in progress: session tokens\n\nChanges README.md.\n\nForge loop auth stopped (cancelled) after 0 iterations; this commit keeps its unfinished work.\n',
      );
    });
    it('unfinished without a section: the objective; without either: the loop', () => {
      assert.equal(loopTeardownMessage({ loopName: 'auth', reason: 'max_iterations', iterations: 15, objective: 'Add login', sectionTitle: null, changes }).split('\n')[0], 'Work in progress: add login');
      const bare = loopTeardownMessage({ loopName: 'auth', reason: 'worktree_failed: disk\nfull', iterations: 2, objective: null, sectionTitle: null, changes: NO_CHANGES });
      assert.equal(bare, 'Work in progress of auth\n\nForge loop auth stopped (worktree_failed: disk full) after 2 iterations; this commit keeps its unfinished work.\n');
    });
    it('a long objective stays one subject line within the limit', () => {
      const subject = loopTeardownMessage({ loopName: 'x', reason: 'cancelled', iterations: 1, objective: 'word '.repeat(40), sectionTitle: null, changes: NO_CHANGES }).split('\n')[0]!;
      assert.ok(subject.length <= SUBJECT_MAX, subject);
    });
  });

  describe('what a commit staged', () => {
    it('stagedFromNameStatus: renames remove the old path and change the new one', () => {
      assert.deepEqual(
        stagedFromNameStatus([
          { status: 'M', path: 'a.ts' },
          { status: 'A', path: 'b.ts' },
          { status: 'D', path: 'c.ts' },
          { status: 'R', path: 'new.ts', oldPath: 'old.ts' },
          { status: 'C', path: 'copy.ts', oldPath: 'a.ts' },
        ]),
        { changed: ['a.ts', 'b.ts', 'new.ts', 'copy.ts'], removed: ['c.ts', 'old.ts'] },
      );
    });
  });
});
