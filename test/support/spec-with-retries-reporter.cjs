'use strict';
// Mocha's spec reporter, plus the error of every attempt that failed and was retried.
// With `retries: 1` the plain spec reporter shows only the last attempt's error, which for a
// test that leaves state behind (a loop name, a branch) is a follow-on error, not the cause.
const Mocha = require('mocha');

const { Spec } = Mocha.reporters;
const { EVENT_TEST_RETRY } = Mocha.Runner.constants;

class SpecWithRetries extends Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.on(EVENT_TEST_RETRY, (test, err) => {
      const stack = (err && (err.stack || err.message)) || String(err);
      process.stdout.write(`\n  [retrying] ${test.fullTitle()} (attempt ${test.currentRetry() + 1} failed):\n`);
      process.stdout.write(`${String(stack).split('\n').map((l) => `    ${l}`).join('\n')}\n\n`);
    });
  }
}

module.exports = SpecWithRetries;
