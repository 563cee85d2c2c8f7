#!/usr/bin/env node
// `npm run demo`: a real Forge loop on a sample repository. Creates a small git repository in a
// temporary folder, runs the two-section sample plan (scripts/demo/plan.md) through the CLI to
// completion, and prints where the branch and Forge's data are. With no model configured it runs
// on Forge's embedded scripted model and says so; FORGE_MODEL=provider/model runs it on a real one.
import { spawnSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, copyFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { forgeCommand } from './demo/forge-command.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist/cli.mjs');
if (!existsSync(cli) || process.env.FORGE_DEMO_REBUILD !== '0') {
  const b = spawnSync(process.execPath, [join(root, 'esbuild.mjs')], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  if (b.status !== 0) process.exit(b.status ?? 1);
}

const work = mkdtempSync(join(tmpdir(), 'forge-demo-'));
const repo = join(work, 'greeting');
const git = (...args) => {
  const r = spawnSync('git', args, { cwd: repo, encoding: 'utf8', env: { ...process.env, GIT_AUTHOR_NAME: 'Forge Demo', GIT_AUTHOR_EMAIL: 'demo@forge.invalid', GIT_COMMITTER_NAME: 'Forge Demo', GIT_COMMITTER_EMAIL: 'demo@forge.invalid' } });
  if (r.status !== 0) throw new Error(`git ${args.join(' ')}: ${r.stderr}`);
  return r.stdout.trim();
};
spawnSync('mkdir', ['-p', repo]);
git('init', '-q', '-b', 'main');
writeFileSync(join(repo, 'README.md'), '# greeting\n\nA sample repository for the Forge demo.\n');
writeFileSync(join(repo, 'package.json'), JSON.stringify({ name: 'greeting', version: '0.0.0', private: true }, null, 2) + '\n');
git('add', '-A');
git('commit', '-q', '-m', 'initial commit');
const plan = join(work, 'plan.md');
copyFileSync(join(root, 'scripts/demo/plan.md'), plan);

const dataDir = process.env.FORGE_DATA_DIR || join(work, 'forge-data');
const args = [cli, 'run', plan, '--repo', repo, '--data-dir', dataDir];
if (process.env.FORGE_MODEL) args.push('--model', process.env.FORGE_MODEL);
console.log(`Forge demo: sample repository ${repo}`);
console.log(`Forge demo: plan ${plan}`);
console.log(process.env.FORGE_MODEL ? `Forge demo: model ${process.env.FORGE_MODEL}` : 'Forge demo: model from your opencode configuration, else Forge\'s embedded scripted model');
console.log('');
const child = spawn(process.execPath, args, { cwd: repo, stdio: 'inherit' });
child.on('exit', (code, signal) => {
  console.log('');
  if (code === 0) {
    console.log(`Forge demo: the loop completed. Its work is on branch forge/greeting-demo of ${repo}:`);
    console.log(git('log', '--oneline', 'forge/greeting-demo'));
    console.log(`Forge demo: worktree ${join(dataDir, 'worktrees', 'greeting-demo')}`);
    console.log(`Forge demo: Forge's data (loops, findings, transitions, usage — what the dashboard shows): ${join(dataDir, 'forge.db')}`);
    const forge = forgeCommand(root, process.env.PATH);
    console.log(`Forge demo: see it again with: ${forge.command} status greeting-demo --repo ${repo} --data-dir ${dataDir}`);
    if (forge.hint) console.log(forge.hint);
  } else {
    console.log(`Forge demo: the loop did not complete (exit ${code ?? signal}). Files are in ${work}.`);
  }
  process.exit(code ?? 1);
});
