// Driving a code-server workbench page (playwright-core) as a user does: the command palette,
// quick picks and input boxes, notification buttons, the text of a part of the workbench, the
// Problems status-bar counts. Used by the harness (test/vscode/run-host.mjs) for the first and
// the second window; tests reach it through the harness's control server
// (`requestWorkbench` / `requestSecondWindow` in suite/support/harness.ts).

/** Runs a command by its palette title (F1, type, Enter); fails unless the first entry is that command. */
export async function runPaletteCommand(page, title) {
  if (typeof title !== 'string' || title === '') throw new Error('command needs a palette title');
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ timeout: 30_000 });
  await input.fill(`>${title}`);
  // The first entry must be the command asked for, not a near match.
  const first = page.locator('.quick-input-widget .monaco-list-row').first();
  await first.waitFor({ timeout: 30_000 });
  const label = ((await first.textContent()) ?? '').trim();
  if (!label.includes(title)) throw new Error(`the palette's first entry for "${title}" is "${label}"`);
  await input.press('Enter');
  return label;
}

/**
 * Answers the quick input (quick pick or input box) whose title, placeholder or prompt contains
 * `expect`, once it is shown (up to `timeoutMs`): clicks the first item whose text contains
 * `pick`, or types `value` (replacing what is there) and presses Enter. Returns what the
 * widget showed: its text and the items' texts.
 */
export async function answerQuickInput(page, { expect, pick, value, timeoutMs = 90_000 }) {
  if (typeof expect !== 'string' || expect === '') throw new Error('quick-input needs "expect": text of the title, placeholder or prompt');
  if ((pick === undefined) === (value === undefined)) throw new Error('quick-input needs exactly one of "pick" (an item\'s text) and "value" (text to enter)');
  const shown = await page.waitForFunction(
    (wanted) => {
      const widget = document.querySelector('.quick-input-widget');
      if (!widget || widget.style.display === 'none' || widget.offsetParent === null) return false;
      const input = widget.querySelector('input');
      const text = `${widget.textContent ?? ''}\n${input?.getAttribute('placeholder') ?? ''}\n${input?.getAttribute('aria-label') ?? ''}`;
      if (!text.includes(wanted)) return false;
      // A quick pick whose items are still loading shows none yet.
      const rows = [...widget.querySelectorAll('.monaco-list-row')].map((row) => (row.textContent ?? '').replace(/\s+/g, ' ').trim());
      return { text: text.replace(/\s+/g, ' ').trim(), rows };
    },
    expect,
    { timeout: timeoutMs, polling: 200 },
  ).catch((error) => {
    throw new Error(`no quick input showing "${expect}" within ${timeoutMs / 1000} s (${error instanceof Error ? error.message.split('\n')[0] : error})`);
  });
  const seen = await shown.jsonValue();
  if (value !== undefined) {
    const input = page.locator('.quick-input-widget input');
    await input.fill(String(value));
    await input.press('Enter');
    return seen;
  }
  const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: pick }).first();
  await row.waitFor({ timeout: 30_000 }).catch(() => {
    throw new Error(`the quick input "${expect}" has no item containing "${pick}" (items: ${seen.rows.join(' | ')})`);
  });
  await row.click();
  return seen;
}

/**
 * Waits for a notification whose message contains `contains`, and clicks its button labelled
 * `button` when one is given. A toast is looked for first; the workbench under test may show
 * none (it keeps them in the notification center): then the center is opened
 * (Notifications: Show Notifications), as a user clicking the bell would. Returns the
 * notification's message and button labels.
 */
export async function answerNotification(page, { contains, button, timeoutMs = 60_000 }) {
  if (typeof contains !== 'string' || contains === '') throw new Error('notification needs "contains": text of its message');
  const item = page.locator('.notification-list-item:visible', { hasText: contains }).first();
  const shown = await item.waitFor({ timeout: 5_000 }).then(() => true, () => false);
  if (!shown) {
    if (!(await page.locator('.notifications-center:visible').count())) await runPaletteCommand(page, 'Notifications: Show Notifications');
    await item.waitFor({ timeout: timeoutMs }).catch(() => {
      throw new Error(`no notification containing "${contains}" within ${timeoutMs / 1000} s (neither a toast nor in the notification center)`);
    });
  }
  const message = ((await item.locator('.notification-list-item-message').first().textContent()) ?? '').trim();
  const buttons = (await item.locator('.notification-list-item-buttons-container .monaco-button').allTextContents()).map((t) => t.trim());
  if (button !== undefined) {
    if (!buttons.includes(button)) throw new Error(`the notification "${message}" has no button "${button}" (buttons: ${buttons.join(', ') || 'none'})`);
    await item.locator('.notification-list-item-buttons-container .monaco-button', { hasText: button }).first().click();
  }
  return { message, buttons };
}

/** The visible text of every element matching `selector` (e.g. the Problems panel, the Settings editor). */
export async function elementTexts(page, selector) {
  if (typeof selector !== 'string' || selector === '') throw new Error('texts needs a CSS selector');
  return page.locator(selector).evaluateAll((elements) => elements.map((e) => (e instanceof HTMLElement ? e.innerText : e.textContent ?? '')));
}

/**
 * Errors, warnings and infos of the workbench's Problems status-bar item, whose
 * accessible label carries the exact counts ("Errors: 1200, Warnings: 800";
 * "No Problems") where its text abbreviates them ("1K").
 */
export async function workbenchProblemCounts(page) {
  const label = await page.evaluate(() => {
    const item = document.getElementById('status.problems');
    if (!item) return null;
    const labelled = item.getAttribute('aria-label') ? item : item.querySelector('[aria-label]');
    return labelled ? labelled.getAttribute('aria-label') : null;
  });
  if (label === null) throw new Error('the workbench has no Problems status-bar item (id "status.problems")');
  const count = (name) => Number(new RegExp(`${name}: (\\d+)`).exec(label)?.[1] ?? 0);
  return { label, errors: count('Errors'), warnings: count('Warnings'), infos: count('Infos') };
}

/**
 * Types `text` into the comment form the workbench shows (after *Comments: Add Comment on Current
 * Selection* or a click on the gutter's "+") and clicks its button labelled `button`, as a user
 * does. Returns the labels of the form's buttons.
 */
export async function submitCommentForm(page, { text, button, timeoutMs = 30_000 }) {
  if (typeof text !== 'string' || text === '' || typeof button !== 'string' || button === '') throw new Error('comment-form needs "text" and "button"');
  const form = page.locator('.review-widget .comment-form:visible').last();
  await form.waitFor({ timeout: timeoutMs }).catch(() => {
    throw new Error(`no comment form shown within ${timeoutMs / 1000} s`);
  });
  // The form's input is a small Monaco editor (older workbenches: a textarea).
  await form.locator('.monaco-editor, textarea').first().click();
  await page.keyboard.type(text);
  // The form's actions (the controller's `comments/commentThread/context` commands) are buttons of
  // the widget around the form.
  const widget = page.locator('.review-widget:visible').last();
  const target = widget.locator('.monaco-button, .action-label', { hasText: button }).first();
  const shown = await target.waitFor({ timeout: 10_000 }).then(() => true, () => false);
  const buttons = (await widget.locator('.monaco-button, .action-label').allTextContents()).map((t) => t.trim()).filter(Boolean);
  if (!shown) {
    const html = (await widget.innerHTML().catch(() => '')).replace(/\s+/g, ' ').slice(0, 3000);
    throw new Error(`the comment form has no button "${button}" (buttons: ${buttons.join(' | ')}); widget: ${html}`);
  }
  await target.click();
  return { buttons };
}

/** Requests of the control server's `/workbench/<what>` route: the first window, driven as above. */
export function workbenchRequests(getPage) {
  const page = () => {
    const p = getPage();
    if (!p) throw new Error('the workbench page is not open yet');
    return p;
  };
  return {
    command: async ({ title }) => ({ ran: await runPaletteCommand(page(), title) }),
    'quick-input': async (body) => answerQuickInput(page(), body),
    notification: async (body) => answerNotification(page(), body),
    texts: async ({ selector }) => ({ texts: await elementTexts(page(), selector) }),
    'comment-form': async (body) => submitCommentForm(page(), body),
  };
}
