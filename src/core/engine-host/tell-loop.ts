/**
 * The user's words to a running loop (issue 29, `forge tell` and *Message the Agent*): the process
 * that supervises the loop delivers them — this one when it drives the loop, else the data
 * folder's engine over its socket. A loop nobody reachable supervises is refused with a message
 * that says how to take it over. Host-neutral: the CLI and the extension call it.
 */
import { LoopRuntimeError, type LoopRef, type LoopRuntime, type UserMessageDelivery } from '../loop/runtime-types';
import { askEngine } from './engine-client';
import { endpointPaths, readEngineInfo } from './endpoint-files';
import { describeSupervision, formatSupervision } from './supervision';

export interface ToldLoop {
  delivery: UserMessageDelivery;
  sessionId: string | null;
}

/** Delivers `text` to the running loop `ref`; a LoopRuntimeError (`not_running` and others) when it cannot. */
export async function tellLoop(runtime: LoopRuntime, dataDir: string, ref: LoopRef, text: string): Promise<ToldLoop> {
  const loop = runtime.get(ref);
  if (!loop) throw new LoopRuntimeError('not_found', `No loop named "${ref.name}" in this repository.`);
  if (loop.status !== 'running' && loop.status !== 'starting') {
    throw new LoopRuntimeError('not_running', `Loop "${ref.name}" is not running (it is ${loop.status}): a message reaches only a running loop.${loop.status === 'completed' ? '' : ` Restart it ("forge restart ${ref.name}") and tell it again.`}`);
  }
  if (runtime.isSupervising(ref)) return runtime.tell(ref, text);
  const reply = await askEngine(dataDir, (conn) => conn.tell(ref, text));
  if (reply?.type === 'told') return { delivery: reply.delivery, sessionId: reply.sessionId };
  if (reply && !(reply.type === 'error' && reply.code === 'not_running')) throw new LoopRuntimeError('bad_request', `Loop "${ref.name}" did not take the message: ${reply.message}`);
  const supervision = describeSupervision(loop, readEngineInfo(endpointPaths(dataDir)));
  const who = supervision ? `its supervisor, ${formatSupervision(supervision)}, ${supervision.alive ? "is not the data folder's engine and takes no messages" : 'is gone'}` : 'no live process supervises it';
  throw new LoopRuntimeError('not_running', `Loop "${ref.name}" cannot take a message: ${who}. Force-restart it ("forge restart ${ref.name} --force", or Force Restart Loop in VS Code) to take it over in a live process (nothing is lost), then tell it again.`);
}
