import { test } from "node:test";
import assert from "node:assert/strict";
import { truncate } from "../src/truncate";

test("truncate keeps short text", () => {
  assert.equal(truncate("short", 10), "short");
});

test("truncate keeps text of exactly the length", () => {
  assert.equal(truncate("exactly", 7), "exactly");
});

test("truncate rejects a negative length", () => {
  assert.throws(() => truncate("text", -1), RangeError);
});

test("truncate with a tiny length returns part of the ellipsis", () => {
  assert.equal(truncate("abcdef", 2, { ellipsis: "..." }), "..");
});
