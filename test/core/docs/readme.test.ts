/**
 * The README is a front page (issue 28): the two commands first, pictures that exist, a first
 * plan that `forge check` passes as it stands, and links into docs/ that lead somewhere. The
 * reference lives in docs/; every relative link there must resolve too.
 */
import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { ensureCliBuilt } from '../../support/cli-runner';
import { REPO_ROOT } from '../../support/loop-harness';

const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function headingsOf(markdown: string): Set<string> {
  const out = new Set<string>();
  let fence = false;
  for (const line of markdown.split('\n')) {
    if (/^(```|~~~)/.test(line)) fence = !fence;
    const m = !fence && /^#{1,6} (.+)$/.exec(line);
    if (m) out.add(slug(m[1]!));
  }
  return out;
}

/** Links and images outside code: [text](target). */
function linksOf(markdown: string): string[] {
  const prose = markdown.replace(/^(````|```)[^\n]*\n[\s\S]*?^\1\s*$/gm, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/!?\[[^\]]*\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
}

describe('README: a front page; the reference in docs/', function () {
  this.timeout(120_000);

  it('starts with what Forge is and the two commands, exactly, and stays short', () => {
    const firstBlock = /```sh\n([\s\S]*?)```/.exec(readme)?.[1];
    assert.equal(firstBlock, 'npm install && npm run demo   # install, then run a real loop on a sample repository\nnpm test                      # install what the tests need, then run every test suite\n');
    assert.ok(readme.indexOf('## Two commands') < readme.indexOf('## A first real plan'));
    assert.ok(readme.split('\n').length <= 120, `README has ${readme.split('\n').length} lines: reference belongs in docs/`);
  });

  it('its pictures are real PNG files', () => {
    const images = [...readme.matchAll(/!\[[^\]]+\]\(([^)]+)\)/g)].map((m) => m[1]!);
    assert.ok(images.length >= 2, 'the dashboard and a finding in the editor');
    for (const image of images) {
      assert.ok(existsSync(join(REPO_ROOT, image)), image);
      assert.deepEqual(readFileSync(join(REPO_ROOT, image)).subarray(0, 8), PNG_SIGNATURE, image);
    }
  });

  it('every relative link of README.md and docs/*.md leads to a file, and an anchor to a heading in it', () => {
    const files = ['README.md', ...readdirSync(join(REPO_ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
    let checked = 0;
    for (const file of files) {
      const text = readFileSync(join(REPO_ROOT, file), 'utf8');
      for (const link of linksOf(text)) {
        if (/^[a-z]+:/.test(link)) continue;
        const [path, anchor] = link.split('#') as [string, string | undefined];
        const target = path === '' ? join(REPO_ROOT, file) : resolve(dirname(join(REPO_ROOT, file)), path);
        assert.ok(existsSync(target), `${file}: ${link} (no ${relative(REPO_ROOT, target)})`);
        if (anchor) assert.ok(headingsOf(readFileSync(target, 'utf8')).has(anchor), `${file}: ${link} (no heading #${anchor})`);
        checked++;
      }
    }
    assert.ok(checked >= 12, `${checked} links checked`);
    // Each docs page is reached from the front page.
    for (const page of files.filter((f) => f.startsWith('docs/'))) assert.ok(readme.includes(`](${page}`), `README links ${page}`);
  });

  it('the first real plan passes forge check as it stands (no error, no warning)', async () => {
    const section = readme.slice(readme.indexOf('## A first real plan'));
    const plan = /````markdown\n([\s\S]*?)````/.exec(section)?.[1];
    assert.ok(plan, 'the plan is in a ````markdown block');
    const cli = ensureCliBuilt(REPO_ROOT);
    const dir = await mkdtemp(join(tmpdir(), 'forge-readme-plan-'));
    try {
      execFileSync('git', ['init', '-q', '-b', 'main', dir]);
      await writeFile(join(dir, 'greeting-plan.md'), plan);
      const out = execFileSync(process.execPath, [cli, 'check', 'greeting-plan.md', '--repo', dir], { cwd: dir, encoding: 'utf8' });
      assert.equal(out.trim(), 'greeting-plan.md: 2 sections, 0 errors, 0 warnings; ready to run.');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
