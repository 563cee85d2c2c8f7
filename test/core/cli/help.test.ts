/**
 * `forge`'s help (issue 28): per-command help, the short usage line after a usage error with a
 * did-you-mean, `--version`, the bash completion script. The help's table is held to what
 * parseCli accepts, option by option and command form by command form, so it cannot drift; the
 * built CLI is run as a process for the output and exit codes.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseCli, UsageError, VERBS, type CliCommand, type Verb } from '../../../src/cli/args';
import { COMMANDS, COMMON_OPTIONS, OPTION_HELP, commandHelp, completionScript, optionsOf, overviewHelp, usageHint } from '../../../src/cli/help';
import { ensureCliBuilt } from '../../support/cli-runner';
import { REPO_ROOT } from '../../support/loop-harness';

/** A valid value of each option that takes one (absent: a switch). */
const SAMPLE: Readonly<Record<string, string>> = {
  repo: '/r',
  'data-dir': '/d',
  name: 'x',
  'max-iterations': '3',
  model: 'a/b',
  'auditor-model': 'a/b',
  variant: 'high',
  budget: '5',
  'budget-tokens': '1000',
  'budget-auditor-share': '0.5',
  merge: 'never',
  check: 'true',
  exists: 'a',
  contains: 'a:b',
  matches: 'a:/b/',
  out: 'o.md',
  continue: 'ab12cd34',
  'max-concurrent': '2',
  'splitter-model': 'a/b',
  into: 'main',
  comment: 'a.ts:1',
  severity: 'warning',
  resolve: '2',
  dismiss: '2',
  accept: '3',
  push: 'origin',
};

const parse = (argv: string[]): CliCommand => parseCli(argv, '/cwd');
const topic = (argv: string[]) => {
  const c = parse(argv);
  assert.equal(c.command, 'help', argv.join(' '));
  return c.command === 'help' ? c.topic : null;
};
const usageError = (argv: string[]): UsageError => {
  try {
    parse(argv);
  } catch (e) {
    if (e instanceof UsageError) return e;
    throw e;
  }
  assert.fail(`${argv.join(' ')} was accepted`);
};

describe('forge help', () => {
  it('the table knows every command and describes every option parseCli takes', () => {
    assert.deepEqual(Object.keys(COMMANDS).sort(), VERBS.filter((v) => v !== 'help').sort());
    for (const c of Object.values(COMMANDS)) for (const f of c.forms) for (const o of f.options) assert.ok(OPTION_HELP[o], `${f.usage}: --${o} is described`);
    for (const [o, h] of Object.entries(OPTION_HELP)) assert.equal(o in SAMPLE, h.arg !== undefined, `--${o}: a value in its help iff it takes one`);
  });

  // Each form accepts exactly the options its help lists (plus the common ones), and refuses the rest.
  for (const [verb, c] of Object.entries(COMMANDS)) {
    for (const form of c.forms) {
      it(`${form.usage}: takes exactly the options its help lists`, () => {
        assert.equal(parse([...form.example]).command, verb === 'completion' ? 'help' : verb, `${form.example.join(' ')} is a valid call`);
        const listed = new Set<string>([...form.options, ...(verb === 'completion' ? [] : COMMON_OPTIONS)]);
        for (const option of Object.keys(OPTION_HELP)) {
          // In the example already (merge's --into), or what makes it another form (plan's --continue).
          if (c.forms.some((f) => f.example.includes(`--${option}`))) continue;
          const argv = [...form.example, `--${option}`, ...(SAMPLE[option] !== undefined ? [SAMPLE[option]!] : [])];
          let accepted = true;
          try {
            parse(argv);
          } catch (e) {
            if (!(e instanceof UsageError)) throw e;
            accepted = false;
          }
          assert.equal(accepted, listed.has(option), `${argv.join(' ')}: ${accepted ? 'accepted but not in its help' : 'in its help but refused'}`);
        }
      });
    }
  }

  it('help topics: forge run --help, forge help run, -h, an action of group, no command, --version anywhere, completion', () => {
    for (const verb of VERBS.filter((v): v is Exclude<Verb, 'help'> => v !== 'help')) {
      assert.equal(topic([verb, '--help']), verb);
      assert.equal(topic(['help', verb]), verb);
      assert.equal(topic([verb, '-h']), verb);
      assert.equal(topic(['--help', verb]), verb);
    }
    assert.equal(topic(['run', 'p.md', '--name', 'x', '--help']), 'run', 'after other options');
    assert.equal(topic(['run', '--bogus', '--help']), 'run', 'help wins over a bad option');
    assert.equal(topic(['--repo', 'run', 'status', '--help']), 'status', "an option's value is not the command");
    assert.equal(topic(['group', 'launch', 'g1', '--help']), 'group');
    assert.equal(topic(['help', '--help']), 'overview');
    for (const argv of [[], ['--help'], ['-h'], ['help']]) assert.equal(topic(argv), 'overview', argv.join(' '));
    for (const argv of [['--version'], ['-V'], ['run', 'p.md', '--version'], ['--version', '--help']]) assert.equal(topic(argv), 'version', argv.join(' '));
    assert.equal(topic(['completion']), 'completion-script');
    // After "--" it is a plan file named --help.
    assert.deepEqual((parse(['run', '--', '--help']) as { planPath: string }).planPath, '--help');
  });

  it('usage errors name the command they were for, with a did-you-mean for a near command or option', () => {
    const cases: Array<[string[], string, Verb | null]> = [
      [['rnu', 'p.md'], 'Unknown command "rnu". Did you mean "run"?', null],
      [['stauts'], 'Unknown command "stauts". Did you mean "status"?', null],
      [['grup', 'prd.md'], 'Unknown command "grup". Did you mean "group"?', null],
      [['explode'], 'Unknown command "explode".', null],
      [['help', 'rnu'], 'Unknown command "rnu". Did you mean "run"?', 'help'],
      [['help', 'run', 'goal'], 'forge help takes at most one command, e.g. forge help run.', 'help'],
      [['run', 'p.md', '--modle', 'a/b'], 'Unknown option --modle. Did you mean --model?', 'run'],
      [['goal', 'x', '--chek', 'true'], 'Unknown option --chek. Did you mean --check?', 'goal'],
      [['status', '--jsn'], 'Unknown option --jsn. Did you mean --json?', 'status'],
      [['status', '--frobnicate'], 'Unknown option --frobnicate.', 'status'],
      [['run'], 'forge run takes exactly one plan file.', 'run'],
      [['group', 'launch'], 'forge group launch takes exactly one group id.', 'group'],
      [['completion', 'zsh'], 'forge completion takes no arguments or options (it prints a bash completion script).', 'completion'],
      [['completion', '--json'], 'forge completion takes no arguments or options (it prints a bash completion script).', 'completion'],
    ];
    for (const [argv, message, verb] of cases) {
      const e = usageError(argv);
      assert.equal(e.message, message, argv.join(' '));
      assert.equal(e.verb, verb, argv.join(' '));
    }
  });

  it('the text: lines within 80 columns, every option of a command in its help, the overview lists every command, a usage hint is short', () => {
    const texts = [overviewHelp(), ...Object.keys(COMMANDS).map((v) => commandHelp(v as Exclude<Verb, 'help'>))];
    for (const text of texts) for (const line of text.split('\n')) assert.ok(line.length <= 80, `too long: ${line}`);
    for (const verb of Object.keys(COMMANDS) as Array<Exclude<Verb, 'help'>>) {
      const help = commandHelp(verb);
      for (const f of COMMANDS[verb].forms) assert.ok(help.includes(f.usage), `${verb}: ${f.usage}`);
      for (const o of optionsOf(verb)) assert.match(help, new RegExp(`^ {2}--${o}\\b`, 'm'), `${verb} --${o}`);
      assert.match(overviewHelp(), new RegExp(`^ {2}forge ${verb}\\b`, 'm'));
      const hint = usageHint(verb).split('\n');
      assert.ok(hint.length <= COMMANDS[verb].forms.length + 2 && hint.at(-1) === `"forge ${verb} --help" lists its options.`, hint.join('\n'));
    }
    assert.equal(usageHint(null).split('\n').length, 2);
    assert.match(commandHelp('plan'), /--model P\/M +the architect's model/);
    assert.match(commandHelp('group'), /--name NAME +the group's id/);
  });

  it('completion: bash completes the commands, a command\'s own options, group actions and files', () => {
    const complete = (words: string[]): string[] => {
      const script = `${completionScript()}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _forge; printf '%s\\n' "\${COMPREPLY[@]}"`;
      const r = spawnSync('bash', ['--norc', '--noprofile', '-c', script], { encoding: 'utf8', cwd: join(REPO_ROOT, 'bin') });
      assert.equal(r.status, 0, r.stderr);
      return r.stdout.split('\n').filter(Boolean).sort();
    };
    assert.deepEqual(complete(['forge', 'r']), ['restart', 'review', 'run']);
    assert.deepEqual(complete(['forge', '--v']), ['--version']);
    assert.deepEqual(complete(['forge', 'help', 'gr']), ['group']);
    assert.deepEqual(complete(['forge', 'run', 'p.md', '--no-']), ['--no-handover', '--no-sandbox']);
    assert.deepEqual(complete(['forge', 'goal', 'x', '--c']), ['--check', '--contains']);
    assert.deepEqual(complete(['forge', 'status', '--']), ['--data-dir', '--help', '--json', '--repo']);
    assert.deepEqual(complete(['forge', 'group', 'l']), ['launch']);
    assert.deepEqual(complete(['forge', 'run', 'fo']), ['forge.js'], 'files otherwise');
  });
});

describe('forge help: the built CLI as a process', function () {
  this.timeout(120_000);
  let cli: string;
  before(() => {
    cli = ensureCliBuilt(REPO_ROOT);
  });
  const forge = (...args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8' });

  it('forge run --help and forge help run print the run help (exit 0); forge --help the overview', () => {
    const a = forge('run', '--help');
    assert.equal(a.status, 0, a.stderr);
    assert.equal(a.stdout.trim(), commandHelp('run'));
    assert.equal(forge('help', 'run').stdout, a.stdout);
    const overview = forge('--help');
    assert.equal(overview.status, 0);
    assert.equal(overview.stdout.trim(), overviewHelp());
    assert.ok(overview.stdout.split('\n').length < 40, 'the overview is short');
  });

  it("--version prints package.json's version", () => {
    const { version } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string };
    for (const flag of ['--version', '-V']) {
      const r = forge(flag);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, `forge ${version}\n`);
    }
  });

  it('a usage error: the message, the usage line and where the help is (not the whole usage), exit 2', () => {
    const r = forge('run', 'p.md', '--modle', 'a/b');
    assert.equal(r.status, 2);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, 'forge: Unknown option --modle. Did you mean --model?\nUsage: forge run PLAN.md [options]\n"forge run --help" lists its options.\n');
    const unknown = forge('stauts');
    assert.equal(unknown.status, 2);
    assert.match(unknown.stderr, /^forge: Unknown command "stauts"\. Did you mean "status"\?\nUsage: forge COMMAND \[options\] {3}\(commands: run, check, /);
  });

  it('forge completion prints the script bash sources', () => {
    const r = forge('completion');
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout.trim(), completionScript());
    const sourced = spawnSync('bash', ['--norc', '--noprofile', '-c', 'eval "$(cat)"; complete -p forge'], { input: r.stdout, encoding: 'utf8' });
    assert.equal(sourced.stdout.trim(), 'complete -o filenames -F _forge forge');
  });
});
