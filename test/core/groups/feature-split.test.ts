/**
 * The pure checks of a feature split (feature-split.ts) and the embedded splitter's reading of a
 * PRD (embedded-model.ts): what Forge accepts from the splitter, and what it says otherwise.
 */
import { strict as assert } from 'node:assert';
import {
  capProblem,
  checkFeatureSplit,
  defaultGroupId,
  describeCycle,
  findDependencyCycle,
  groupIdProblem,
  reviewFileName,
  type SplitFeature,
} from '../../../src/core/groups/feature-split';
import { prdFeatureSections } from '../../../src/core/opencode/embedded-model';
import { validatePlan } from '../../../src/core/loop/plan-validation';
import { MAX_GROUP_FEATURES } from '../../../src/core/vocabulary/group-vocabulary';

const PLAN = '# A feature\n\n## Do it\nWrite a.txt.\n';
const f = (id: string, dependsOn: string[] = [], plan = PLAN): SplitFeature => ({ id, title: `Feature ${id}`, dependsOn, plan });

describe('feature split checks', () => {
  it('accepts a well-formed split', () => {
    assert.deepEqual(checkFeatureSplit([f('auth'), f('billing', ['auth']), f('search')], 'shop'), []);
  });

  it('refuses an empty split and one with more than MAX_GROUP_FEATURES features', () => {
    assert.equal(checkFeatureSplit([])[0]?.code, 'bad_prd');
    const many = Array.from({ length: MAX_GROUP_FEATURES + 1 }, (_, i) => f(`f${i}`));
    assert.match(checkFeatureSplit(many)[0]!.message, new RegExp(`${MAX_GROUP_FEATURES + 1} features; a group holds at most ${MAX_GROUP_FEATURES}`));
  });

  it('refuses bad ids, ids too long for the loop name, duplicates and empty titles', () => {
    const problems = checkFeatureSplit([f('Bad Id'), f('ok'), f('ok'), { ...f('untitled'), title: ' ' }], 'g');
    assert.deepEqual(problems.map((p) => [p.code, p.featureId]), [
      ['bad_prd', 'Bad Id'],
      ['duplicate_feature', 'ok'],
      ['bad_prd', 'untitled'],
    ]);
    const long = checkFeatureSplit([f('a'.repeat(30))], 'a-rather-long-group-id');
    assert.match(long[0]!.message, /makes the loop name .* not a valid loop name/);
  });

  it('names unknown dependencies with the known ids', () => {
    const [p] = checkFeatureSplit([f('a', ['ghost']), f('b')]);
    assert.equal(p?.code, 'unknown_dependency');
    assert.match(p!.message, /"a" depends on "ghost", which is not a feature of this split\. Known ids: a, b\./);
  });

  it('names a cycle as the ids walked, and a self-dependency', () => {
    const problems = checkFeatureSplit([f('a', ['c']), f('b', ['a']), f('c', ['b']), f('d')]);
    assert.equal(problems.length, 1);
    assert.equal(problems[0]!.code, 'cycle');
    assert.match(problems[0]!.message, /The dependencies form a cycle: a → c → b → a\./);
    const self = checkFeatureSplit([f('a', ['a'])]);
    assert.deepEqual(self.map((p) => p.message), ['Feature "a" depends on itself (a → a).']);
  });

  it('refuses a plan Forge cannot run, naming the feature and the line', () => {
    const [p] = checkFeatureSplit([f('a', [], '   ')]);
    assert.equal(p?.code, 'bad_plan');
    assert.match(p!.message, /the plan of feature "a", line 1: .*empty/);
  });

  it('findDependencyCycle: none in a DAG, ignores unknown ids, finds the first cycle', () => {
    assert.equal(findDependencyCycle([{ id: 'a', dependsOn: [] }, { id: 'b', dependsOn: ['a', 'ghost'] }]), null);
    assert.deepEqual(findDependencyCycle([{ id: 'x', dependsOn: ['y'] }, { id: 'y', dependsOn: ['x'] }]), ['x', 'y', 'x']);
    assert.equal(describeCycle(['x', 'y', 'x']), 'x → y → x');
  });

  it('the cap: a whole number from 1 to 16', () => {
    for (const ok of [1, 3, 16]) assert.equal(capProblem(ok), null);
    for (const bad of [0, 17, 1000, 2.5, -1, Number.NaN]) assert.match(capProblem(bad)!, /must be a whole number from 1 to 16, not /);
  });

  it('group ids: a short loop-name slug; the default comes from the PRD title, made unique', () => {
    assert.equal(groupIdProblem('release-2'), null);
    assert.match(groupIdProblem('../x')!, /cannot be a group id/);
    assert.match(groupIdProblem('a'.repeat(25))!, /at most 24/);
    assert.equal(defaultGroupId('# Shop: the Big Release\n', 'prd.md', new Set()), 'shop-the-big-re');
    assert.equal(defaultGroupId('no heading', '/x/My PRD.md', new Set(['my-prd'])), 'my-prd-2');
    assert.equal(reviewFileName(0, 'auth'), '01-auth.md');
    assert.equal(reviewFileName(11, 'x'), '12-x.md');
  });
});

describe('the embedded splitter reads "## Feature <id>: <title>" sections', () => {
  const fence = '```';
  const PRD = [
    '# Shop',
    'Intro text.',
    '## Feature catalog: Product catalog',
    'Depends on: (none)',
    'List the products.',
    '## Feature cart: Cart',
    'Depends on: catalog, search',
    '### Write cart',
    `${fence}md file=cart.md`,
    '## Feature not-a-heading: inside a fence',
    fence,
    '### Check it',
    'Run: `cat cart.md`',
    '## Notes',
    'Not a feature.',
  ].join('\n');

  it('finds each feature, its dependencies, and turns its body into a plan that passes validation', () => {
    const features = prdFeatureSections(PRD);
    assert.deepEqual(features.map((x) => [x.id, x.title, x.dependsOn]), [
      ['catalog', 'Product catalog', []],
      ['cart', 'Cart', ['catalog', 'search']],
    ]);
    // A body without sub-headings is one section; ### sub-headings become the plan's sections.
    assert.equal(features[0]!.plan, '# Product catalog\n\n## Product catalog\nList the products.\n');
    assert.match(features[1]!.plan, /^# Cart\n\n## Write cart\n```md file=cart\.md\n## Feature not-a-heading: inside a fence\n```\n## Check it\nRun: `cat cart\.md`\n$/);
    for (const x of features) assert.deepEqual(validatePlan(x.plan).problems.filter((p) => p.severity === 'error'), []);
  });

  it('a PRD without feature sections gives none', () => {
    assert.deepEqual(prdFeatureSections('# Ideas\n\n## Goals\nMake it better.\n'), []);
  });
});
