/**
 * How the user's words to a running loop (`forge tell`, *Message the Agent*) are framed for the
 * agent, and how a live view finds them again in what opencode echoes back. Pure.
 */

export const USER_MESSAGE_LEAD = 'Message from the user (via forge tell)';
const INTO_SESSION_TAIL = "\n\nTake it into account in the task you are doing; Forge's instructions for your pass still apply.";
const QUEUED_INTRO = 'The user sent this while the loop was between sessions. Take it into account in this pass.';

/** The user's words, verbatim, framed so the agent knows who speaks (sent into a running session). */
export function buildUserMessage(text: string): string {
  return `${USER_MESSAGE_LEAD}:\n\n${text}${INTO_SESSION_TAIL}`;
}

/** The part of a phase prompt that carries the messages sent while the loop was between sessions. */
export function userMessagesSection(messages: readonly string[]): string {
  if (messages.length === 0) return '';
  const heading = messages.length === 1 ? `## ${USER_MESSAGE_LEAD}` : `## Messages from the user (via forge tell), oldest first (${messages.length})`;
  return ['', '', heading, '', QUEUED_INTRO, '', ...messages.flatMap((m, i) => (i === 0 ? [m] : ['---', m]))].join('\n');
}

/** The user's words in a prompt Forge sent (a live view's user part); null when it carries none. */
export function userWordsIn(prompt: string): string | null {
  const lead = `${USER_MESSAGE_LEAD}:\n\n`;
  if (prompt.startsWith(lead) && prompt.endsWith(INTO_SESSION_TAIL)) return prompt.slice(lead.length, prompt.length - INTO_SESSION_TAIL.length);
  const at = prompt.lastIndexOf(`\n${QUEUED_INTRO}\n\n`);
  return at >= 0 ? prompt.slice(at + QUEUED_INTRO.length + 3) : null;
}
