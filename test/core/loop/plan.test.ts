import { strict as assert } from 'node:assert';
import { MAX_SECTIONS, parsePlan, PlanError, validatePlanText } from '../../../src/core/loop/plan';

describe('plan decomposition', () => {
  it('splits on "## " headings, keeps title, loop name, objective and verification apart', () => {
    const p = parsePlan(
      [
        '# Add a greeting CLI',
        'Loop Name: Greeting CLI',
        '',
        '## Objective',
        'Users can greet.',
        '## Parse arguments',
        'Use process.argv.',
        '### Detail',
        'nested stays inside',
        '## Print greeting',
        'Print "hello NAME".',
        '## Verification',
        'Run node cli.js bob',
      ].join('\n'),
    );
    assert.equal(p.title, 'Add a greeting CLI');
    assert.equal(p.loopName, 'Greeting CLI');
    assert.equal(p.objective, 'Users can greet.');
    assert.equal(p.verification, 'Run node cli.js bob');
    assert.deepEqual(
      p.sections.map((s) => [s.index, s.title, s.body]),
      [
        [0, 'Parse arguments', 'Use process.argv.\n### Detail\nnested stays inside'],
        [1, 'Print greeting', 'Print "hello NAME".'],
      ],
    );
    assert.deepEqual(p.notices, []);
  });

  it('with forge-section markers, only marked headings split', () => {
    const p = parsePlan(
      ['# T', '<!-- forge-section -->', '## One', 'a', '## Notes inside one', 'b', '', '<!-- forge-section -->', '## Two', 'c'].join('\n'),
    );
    assert.deepEqual(
      p.sections.map((s) => s.title),
      ['One', 'Two'],
    );
    assert.equal(p.sections[0]!.body, 'a\n## Notes inside one\nb');
  });

  it('ignores headings inside code fences', () => {
    const p = parsePlan('# T\n## A\n```md\n## not a section\n```\n## B\nx');
    assert.deepEqual(
      p.sections.map((s) => s.title),
      ['A', 'B'],
    );
  });

  it('an unsectioned plan has no sections and a title from its first words', () => {
    const p = parsePlan('Make the tests pass and tidy up the README please.');
    assert.deepEqual(p.sections, []);
    assert.equal(p.title, 'Make the tests pass and tidy up the');
  });

  it(`runs at most ${MAX_SECTIONS} sections and says which were dropped`, () => {
    const text = ['# Big', ...Array.from({ length: 30 }, (_, i) => `## Step ${i + 1}\ndo ${i + 1}`)].join('\n');
    const p = parsePlan(text);
    assert.equal(p.sections.length, 24);
    assert.deepEqual(p.droppedSectionTitles, ['Step 25', 'Step 26', 'Step 27', 'Step 28', 'Step 29', 'Step 30']);
    assert.equal(p.notices.length, 1);
    assert.match(p.notices[0]!, /30 sections; Forge runs at most 24/);
    assert.match(p.notices[0]!, /"Step 30"/);
  });

  it('rejects empty, whitespace-only and comment-only plans', () => {
    for (const t of ['', '   \n\n', '<!-- forge-section -->\n']) {
      assert.throws(() => parsePlan(t, 'plan.md'), (e: unknown) => e instanceof PlanError && e.code === 'empty' && /plan\.md is empty/.test(e.message));
    }
  });

  it('rejects binary content with a clear message', () => {
    assert.throws(
      () => validatePlanText('PNG\u0000\u0001\u0002', 'logo.png'),
      (e: unknown) => e instanceof PlanError && e.code === 'binary' && /logo\.png looks like a binary file/.test(e.message),
    );
    assert.throws(() => validatePlanText('\uFFFD\uFFFD\uFFFD abc'), (e: unknown) => e instanceof PlanError && e.code === 'binary');
  });

  it('handles CRLF line endings', () => {
    const p = parsePlan('# T\r\n## A\r\nx\r\n## B\r\ny');
    assert.deepEqual(
      p.sections.map((s) => [s.title, s.body]),
      [
        ['A', 'x'],
        ['B', 'y'],
      ],
    );
  });
});
