/**
 * Answers permission requests (and questions) of loop sessions at once, by policy, so a loop
 * never waits on a human. Requests of sessions the resolver does not know are left alone.
 */
import type { AgentClient, PermissionRequest, PermissionReply } from './agent-client';
import { decidePermissionReply, type LoopPermissionOptions } from './permissions';

export interface PermissionResponderLogEntry {
  sessionId: string;
  rootSessionId: string;
  permission: string;
  patterns: string[];
  reply: PermissionReply | 'question-rejected';
  reason: string;
}

export interface PermissionResponderOptions {
  client: AgentClient;
  /** Loop permission options for a session (given its top-level session id); undefined: not a loop session. */
  resolve: (rootSessionId: string, sessionId: string) => LoopPermissionOptions | undefined;
  log?: (entry: PermissionResponderLogEntry) => void;
  onError?: (error: unknown) => void;
}

/** Returns a function that detaches the responder. */
export function attachPermissionResponder(options: PermissionResponderOptions): () => void {
  const log = options.log ?? (() => {});
  const onError = options.onError ?? (() => {});
  return options.client.subscribe((event) => {
    if (event.type === 'permission.asked') {
      const policy = options.resolve(event.rootSessionId, event.request.sessionId);
      if (!policy) return;
      void answer(event.request, event.rootSessionId, policy);
    } else if (event.type === 'question.asked') {
      if (!options.resolve(event.rootSessionId, event.sessionId)) return;
      log({
        sessionId: event.sessionId,
        rootSessionId: event.rootSessionId,
        permission: 'question',
        patterns: [],
        reply: 'question-rejected',
        reason: 'loop sessions cannot ask questions',
      });
      options.client.rejectQuestion(event.requestId).catch(onError);
    }
  });

  async function answer(request: PermissionRequest, rootSessionId: string, policy: LoopPermissionOptions): Promise<void> {
    const decision = decidePermissionReply(request, policy);
    log({
      sessionId: request.sessionId,
      rootSessionId,
      permission: request.permission,
      patterns: request.patterns,
      reply: decision.reply,
      reason: decision.reason,
    });
    try {
      await options.client.replyPermission(request.id, decision.reply, decision.reply === 'reject' ? decision.reason : undefined);
    } catch (error) {
      onError(error);
    }
  }
}
