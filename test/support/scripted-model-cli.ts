/**
 * The scripted model as a standalone process (the offline demo runs a real loop on it):
 *
 *   npx tsx test/support/scripted-model-cli.ts [--port 0] [--script ./demo-script.ts] [--verbose]
 *
 * `--script` names a module whose default export is a `ScriptHandler` or
 * `{ handler?: ScriptHandler, steps?: ScriptStep[], title?: string }`. Without it every request
 * gets a short text reply. Prints one JSON line `{"baseURL": "...", "port": N}` on stdout when
 * ready; stops on SIGINT/SIGTERM.
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { startScriptedModel, type ScriptHandler, type ScriptStep } from './scripted-model';

interface ScriptModule {
  handler?: ScriptHandler;
  steps?: ScriptStep[];
  title?: string;
}

function argument(name: string): string | undefined {
  const index = process.argv.indexOf(`--${name}`);
  return index >= 0 ? process.argv[index + 1] : undefined;
}

async function loadScript(path: string | undefined): Promise<ScriptModule> {
  if (!path) return {};
  const loaded = (await import(pathToFileURL(resolve(path)).href)) as { default?: ScriptHandler | ScriptModule };
  const value = loaded.default;
  if (typeof value === 'function') return { handler: value };
  if (value && typeof value === 'object') return value;
  throw new Error(`${path} must export default a handler function or { handler, steps, title }.`);
}

async function main(): Promise<void> {
  const script = await loadScript(argument('script'));
  const verbose = process.argv.includes('--verbose');
  const model = await startScriptedModel({
    port: Number(argument('port') ?? 0),
    ...(script.handler ? { handler: script.handler } : {}),
    ...(script.title ? { title: script.title } : {}),
  });
  if (script.steps) model.enqueue(...script.steps);
  if (verbose) {
    const timer = setInterval(() => {
      while (reported < model.requests.length) {
        const r = model.requests[reported++];
        if (r) process.stderr.write(`request ${r.index} session=${r.sessionId ?? '-'} title=${r.isTitleRequest} tools=${r.toolNames.length}\n`);
      }
    }, 200);
    timer.unref();
  }
  let reported = 0;
  process.stdout.write(`${JSON.stringify({ baseURL: model.baseURL, port: model.port })}\n`);
  const stop = () => {
    void model.close().then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`scripted model: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
