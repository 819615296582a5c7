import { test } from "node:test";
import assert from "node:assert/strict";
import { wrap } from "../src/wrap";

test("wrap breaks at spaces", () => {
  assert.deepEqual(wrap("the quick brown fox jumps", 10), ["the quick", "brown fox", "jumps"]);
});

test("wrap gives a long word its own line", () => {
  assert.deepEqual(wrap("a supercalifragilistic word", 8), ["a", "supercalifragilistic", "word"]);
});

test("wrap rejects a zero width", () => {
  assert.throws(() => wrap("text", 0), RangeError);
});
