/**
 * A scripted model for loop tests whose first coder session acts and everyone else hands off:
 * the first coder session runs `firstCoder`'s steps and then hands off; every later coder session
 * only hands off; every auditor approves at once. Tests put what they try (a hostile command, the
 * work itself) into `firstCoder` and watch what Forge's own checks make of it.
 */
import { roleOf, type AgentRole } from './loop-harness';
import { text, toolCall, toolCalls, type ScriptedRequest, type ScriptStep } from './scripted-model';

let callCounter = 0;

/** One `bash` tool call; ids stay unique across the run. */
export function bashCall(id: string, command: string): ScriptStep {
  return toolCalls([{ id: `${id}-${++callCounter}`, name: 'bash', args: { command, description: id } }]);
}

const coderHandoff = () => toolCall('forge_loop_handoff', { decisions: 'done', verification: 'all green', notesForAuditor: '' });
const auditorApproves = () => toolCall('forge_loop_handoff', { summary: 'approved', done: true, deviations: '', followUps: '' });

export function firstCoderActsScript(firstCoder: ScriptStep[]): (request: ScriptedRequest) => ScriptStep {
  const sessions = new Map<string, { role: AgentRole; turn: number; nth: number }>();
  let coders = 0;
  return (request) => {
    const sid = request.sessionId ?? 'unknown';
    let s = sessions.get(sid);
    if (!s) {
      const role = roleOf(request);
      s = { role, turn: 0, nth: role === 'code' ? ++coders : 0 };
      sessions.set(sid, s);
    }
    const turn = s.turn++;
    if (s.role === 'code') return [...(s.nth === 1 ? firstCoder : []), coderHandoff()][turn] ?? text('Done.');
    return turn === 0 ? auditorApproves() : text('Done.');
  };
}
