import assert from 'node:assert/strict';
import {
  describeSetupFailure,
  detectProjects,
  outputTail,
  packageCacheEnv,
  parseWorktreeConfig,
  planDependencies,
  setupCommands,
  type CheckoutFacts,
} from '../../../src/core/workspace/worktree-setup/setup-plan';

/** Facts where the named lockfiles differ and the named folders are installed. */
function facts(installed: string[], differ: string[] = []): CheckoutFacts {
  return { sameLockfile: (l) => !differ.includes(l), installed: (f) => installed.includes(f) };
}

describe('worktree setup: the pure planner', () => {
  describe('detectProjects: projects from the tracked lockfiles', () => {
    const cases: Array<[string, string[], Array<{ dir: string; manager: string; install: string; folders: string[] }>]> = [
      ['npm', ['package.json', 'package-lock.json', 'src/a.js'], [{ dir: '', manager: 'npm', install: 'npm ci', folders: ['node_modules'] }]],
      ['pnpm wins over a stray package-lock', ['package.json', 'pnpm-lock.yaml', 'package-lock.json'], [{ dir: '', manager: 'pnpm', install: 'pnpm install --frozen-lockfile', folders: ['node_modules'] }]],
      ['yarn classic', ['package.json', 'yarn.lock'], [{ dir: '', manager: 'yarn', install: 'yarn install --frozen-lockfile', folders: ['node_modules'] }]],
      ['yarn berry', ['package.json', 'yarn.lock', '.yarnrc.yml'], [{ dir: '', manager: 'yarn', install: 'yarn install --immutable', folders: ['node_modules'] }]],
      ['bun text lockfile', ['package.json', 'bun.lock'], [{ dir: '', manager: 'bun', install: 'bun install --frozen-lockfile', folders: ['node_modules'] }]],
      ['bun binary lockfile', ['bun.lockb'], [{ dir: '', manager: 'bun', install: 'bun install --frozen-lockfile', folders: ['node_modules'] }]],
      ['uv', ['pyproject.toml', 'uv.lock'], [{ dir: '', manager: 'uv', install: 'uv sync --frozen', folders: ['.venv'] }]],
      ['poetry', ['pyproject.toml', 'poetry.lock'], [{ dir: '', manager: 'poetry', install: 'poetry install --no-root --no-interaction', folders: ['.venv'] }]],
      [
        'pip requirements (the main file first)',
        ['requirements-dev.txt', 'requirements.txt', 'app.py'],
        [{ dir: '', manager: 'pip', install: 'python3 -m venv .venv && .venv/bin/python -m pip install -r requirements.txt -r requirements-dev.txt', folders: ['.venv', 'venv'] }],
      ],
      ['uv wins over requirements', ['uv.lock', 'requirements.txt'], [{ dir: '', manager: 'uv', install: 'uv sync --frozen', folders: ['.venv'] }]],
      ['composer', ['composer.json', 'composer.lock'], [{ dir: '', manager: 'composer', install: 'composer install --no-interaction', folders: ['vendor'] }]],
      [
        'npm workspaces: members without a lockfile add their node_modules to the root project',
        ['package.json', 'package-lock.json', 'packages/a/package.json', 'packages/b/package.json', 'packages/b/index.js'],
        [{ dir: '', manager: 'npm', install: 'npm ci', folders: ['node_modules', 'packages/a/node_modules', 'packages/b/node_modules'] }],
      ],
      [
        'nested lockfiles are projects of their own; members go to the nearest',
        ['package-lock.json', 'package.json', 'web/package.json', 'web/pnpm-lock.yaml', 'web/pkgs/ui/package.json', 'api/requirements.txt', 'tools/package.json'],
        [
          { dir: '', manager: 'npm', install: 'npm ci', folders: ['node_modules', 'tools/node_modules'] },
          { dir: 'api', manager: 'pip', install: 'python3 -m venv .venv && .venv/bin/python -m pip install -r requirements.txt', folders: ['api/.venv', 'api/venv'] },
          { dir: 'web', manager: 'pnpm', install: 'pnpm install --frozen-lockfile', folders: ['web/node_modules', 'web/pkgs/ui/node_modules'] },
        ],
      ],
      ['a node project and a python project in one folder', ['package-lock.json', 'requirements.txt'], [
        { dir: '', manager: 'npm', install: 'npm ci', folders: ['node_modules'] },
        { dir: '', manager: 'pip', install: 'python3 -m venv .venv && .venv/bin/python -m pip install -r requirements.txt', folders: ['.venv', 'venv'] },
      ]],
      ['lockfiles inside dependency folders are not projects', ['node_modules/x/package-lock.json', 'vendor/y/composer.lock', '.venv/requirements.txt'], []],
      ['no lockfile: nothing to install', ['package.json', 'README.md', 'requirements.in'], []],
    ];
    for (const [name, paths, expected] of cases) {
      it(name, () => {
        const got = detectProjects(paths).map((p) => ({ dir: p.dir, manager: p.manager, install: p.install, folders: p.folders }));
        assert.deepEqual(got, expected);
      });
    }
  });

  describe('planDependencies: reuse or install', () => {
    const npm = detectProjects(['package.json', 'package-lock.json', 'packages/a/package.json', 'packages/b/package.json']);
    it('reuse: same lockfile and installed in the checkout → every installed folder is bound', () => {
      const plan = planDependencies(npm, facts(['node_modules', 'packages/a/node_modules']), 'reuse');
      assert.deepEqual(plan.install, []);
      assert.deepEqual(plan.reuse.map((r) => [r.folder, r.alsoAtCheckoutPath]), [['node_modules', false], ['packages/a/node_modules', false]]);
    });
    it('a changed lockfile installs, and says why', () => {
      const plan = planDependencies(npm, facts(['node_modules'], ['package-lock.json']), 'reuse');
      assert.deepEqual(plan.reuse, []);
      assert.equal(plan.install.length, 1);
      assert.equal(plan.install[0]!.command, 'npm ci');
      assert.match(plan.install[0]!.why, /package-lock\.json differs/);
      assert.deepEqual(plan.install[0]!.folders, ['node_modules', 'packages/a/node_modules', 'packages/b/node_modules']);
    });
    it('nothing installed in the checkout installs', () => {
      const plan = planDependencies(npm, facts(['packages/a/node_modules']), 'reuse');
      assert.deepEqual(plan.reuse, []);
      assert.match(plan.install[0]!.why, /nothing is installed in your checkout's node_modules/);
    });
    it('mode install always installs', () => {
      const plan = planDependencies(npm, facts(['node_modules']), 'install');
      assert.deepEqual(plan.reuse, []);
      assert.match(plan.install[0]!.why, /"install"/);
    });
    it('python: the first installed environment is reused, also at the checkout path', () => {
      const py = detectProjects(['requirements.txt']);
      const plan = planDependencies(py, facts(['venv']), 'reuse');
      assert.deepEqual(plan.reuse.map((r) => [r.folder, r.alsoAtCheckoutPath]), [['venv', true]]);
      const both = planDependencies(py, facts(['.venv', 'venv']), 'reuse');
      assert.deepEqual(both.reuse.map((r) => r.folder), ['.venv']);
    });
    it('python: any requirements file changed → install into .venv', () => {
      const py = detectProjects(['requirements.txt', 'requirements-dev.txt']);
      const plan = planDependencies(py, facts(['.venv'], ['requirements-dev.txt']), 'reuse');
      assert.deepEqual(plan.reuse, []);
      assert.deepEqual(plan.install[0]!.folders, ['.venv']);
      assert.match(plan.install[0]!.why, /requirements\.txt differs/);
    });
    it('the installed marker is asked per project kind', () => {
      const asked: Array<[string, string]> = [];
      planDependencies(detectProjects(['composer.lock', 'uv.lock', 'package-lock.json']), { sameLockfile: () => true, installed: (f, m) => (asked.push([f, m]), false) }, 'reuse');
      assert.deepEqual(asked.sort(), [['.venv', 'pyvenv.cfg'], ['node_modules', ''], ['vendor', 'autoload.php']]);
    });
    it('projects decide independently', () => {
      const both = detectProjects(['package-lock.json', 'api/uv.lock']);
      const plan = planDependencies(both, facts(['node_modules', 'api/.venv'], ['api/uv.lock']), 'reuse');
      assert.deepEqual(plan.reuse.map((r) => r.folder), ['node_modules']);
      assert.deepEqual(plan.install.map((i) => [i.dir, i.command]), [['api', 'uv sync --frozen']]);
    });
  });

  describe('.forge/worktree.json and the command list', () => {
    it('parses the committed setup commands', () => {
      assert.deepEqual(parseWorktreeConfig('{"setup": ["make dev", "npm run build"]}'), { setup: ['make dev', 'npm run build'], problem: null });
      assert.deepEqual(parseWorktreeConfig(null), { setup: [], problem: null });
      assert.deepEqual(parseWorktreeConfig('{}'), { setup: [], problem: null });
    });
    for (const [text, problem] of [
      ['{', /not JSON/],
      ['[]', /must be an object/],
      ['{"setup": "make"}', /list of non-empty command strings/],
      ['{"setup": ["ok", ""]}', /list of non-empty command strings/],
      ['{"setup": [1]}', /list of non-empty command strings/],
    ] as const) {
      it(`reports ${text}`, () => {
        const got = parseWorktreeConfig(text);
        assert.deepEqual(got.setup, []);
        assert.match(got.problem ?? '', problem);
      });
    }
    it('installs first, then the committed commands, then the setting', () => {
      const plan = planDependencies(detectProjects(['web/package-lock.json']), facts([]), 'reuse');
      const cmds = setupCommands(plan, ['make a'], ['make b']);
      assert.deepEqual(cmds.map((c) => [c.command, c.dir]), [['npm ci', 'web'], ['make a', ''], ['make b', '']]);
      assert.match(cmds[0]!.label, /^install web\/node_modules \(npm ci; nothing is installed/);
      assert.equal(cmds[1]!.label, 'setup: make a');
    });
  });

  describe('failure text and environment', () => {
    const step = { label: 'setup: make dev', command: 'make dev', dir: '' };
    it('exit 127 says the command is missing where setup ran', () => {
      const text = describeSetupFailure(step, { exitCode: 127, timedOut: false, output: 'sh: 1: make: not found\n' }, 'the bwrap sandbox');
      assert.match(text, /command not found \(exit 127\): the bwrap sandbox lacks a program/);
      assert.match(text, /make: not found$/);
    });
    it('a timeout and a plain failure', () => {
      assert.match(describeSetupFailure(step, { exitCode: null, timedOut: true, output: '' }, 'x'), /did not finish within forge\.worktree\.setupTimeoutMs$/);
      assert.match(describeSetupFailure(step, { exitCode: 2, timedOut: false, output: 'boom' }, 'x'), /failed \(exit 2\):\nboom$/);
    });
    it('the output tail keeps the last lines and characters', () => {
      const many = Array.from({ length: 40 }, (_, i) => `line ${i}`).join('\n');
      assert.equal(outputTail(many, 3), 'line 37\nline 38\nline 39');
      assert.equal(outputTail('x'.repeat(50), 5, 10), `…${'x'.repeat(10)}`);
    });
    it('every package manager cache goes into Forge\'s cache folder', () => {
      const env = packageCacheEnv('/data/package-cache');
      for (const [k, v] of Object.entries(env)) if (v.startsWith('/')) assert.ok(v.startsWith('/data/package-cache/'), k);
      assert.equal(env.npm_config_cache, '/data/package-cache/npm');
      assert.equal(env.PIP_CACHE_DIR, '/data/package-cache/pip');
      assert.equal(env.UV_CACHE_DIR, '/data/package-cache/uv');
    });
  });
});
