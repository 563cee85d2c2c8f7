// The scripted model lives in the engine (it is also Forge's embedded model for the demo);
// tests import it from here.
export * from '../../src/core/opencode/scripted-model';
