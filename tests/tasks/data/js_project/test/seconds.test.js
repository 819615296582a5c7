const { test } = require("node:test");
const assert = require("node:assert/strict");
const { seconds } = require("..");

test("seconds of hours", () => {
  assert.equal(seconds("2h"), 7200);
});

test("seconds of seconds", () => {
  assert.equal(seconds("90s"), 90);
});
