/**
 * The engine API the extension builds on (src/core/engine.ts). Types only: the engine
 * code itself is loaded on first use (see core-module.ts), never at activation.
 */
export type { EngineLog, ForgeEngine, ForgeEngineOptions } from '../core/engine';
