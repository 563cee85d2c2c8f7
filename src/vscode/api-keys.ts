import * as vscode from 'vscode';

/** Provider API keys as opencode reads them from its environment. */
export const KNOWN_PROVIDER_KEYS: readonly { readonly provider: string; readonly env: string }[] = [
  { provider: 'Anthropic', env: 'ANTHROPIC_API_KEY' },
  { provider: 'OpenAI', env: 'OPENAI_API_KEY' },
  { provider: 'OpenRouter', env: 'OPENROUTER_API_KEY' },
  { provider: 'Google Gemini', env: 'GOOGLE_GENERATIVE_AI_API_KEY' },
  { provider: 'Groq', env: 'GROQ_API_KEY' },
  { provider: 'Mistral', env: 'MISTRAL_API_KEY' },
  { provider: 'DeepSeek', env: 'DEEPSEEK_API_KEY' },
  { provider: 'xAI', env: 'XAI_API_KEY' },
];

export const ENV_NAME_PATTERN = /^[A-Z_][A-Z0-9_]*$/;

/**
 * API keys the user entered, in VS Code's SecretStorage (never in settings, the database
 * or the log). Only the variable names are kept in global state, to list them.
 */
export interface ApiKeyStore {
  /** Every stored key as environment variables for opencode. */
  environment(): Promise<Record<string, string>>;
  set(envName: string, value: string): Promise<void>;
  delete(envName: string): Promise<void>;
  names(): string[];
}

const NAMES_KEY = 'forge.apiKeyNames';
const secretKey = (envName: string) => `forge.apiKey.${envName}`;

export function createApiKeyStore(secrets: vscode.SecretStorage, state: vscode.Memento): ApiKeyStore {
  const names = () => state.get<string[]>(NAMES_KEY) ?? [];
  return {
    async environment() {
      const env: Record<string, string> = {};
      for (const name of names()) {
        const value = await secrets.get(secretKey(name));
        if (value) env[name] = value;
      }
      return env;
    },
    async set(envName, value) {
      if (!ENV_NAME_PATTERN.test(envName)) throw new Error(vscode.l10n.t('"{0}" is not an environment variable name (use A–Z, 0–9 and _).', envName));
      await secrets.store(secretKey(envName), value);
      if (!names().includes(envName)) await state.update(NAMES_KEY, [...names(), envName].sort());
    },
    async delete(envName) {
      await secrets.delete(secretKey(envName));
      await state.update(NAMES_KEY, names().filter((n) => n !== envName));
    },
    names,
  };
}
