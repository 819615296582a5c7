import { test } from "node:test";
import assert from "node:assert/strict";
import { plural, pluralize } from "../src/plural";

test("plural adds s", () => {
  assert.equal(plural("cat"), "cats");
});

test("plural adds es after a sibilant", () => {
  assert.equal(plural("box"), "boxes");
  assert.equal(plural("church"), "churches");
});

test("plural of a consonant and y", () => {
  assert.equal(plural("city"), "cities");
});

test("plural of irregular and unchanged nouns", () => {
  assert.equal(plural("child"), "children");
  assert.equal(plural("sheep"), "sheep");
});

test("pluralize counts", () => {
  assert.equal(pluralize(1, "box"), "1 box");
  assert.equal(pluralize(3, "box"), "3 boxes");
});
