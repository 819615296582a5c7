import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { camelCase, kebabCase, snakeCase, words } from "../src/case";

describe("words", () => {
  it("splits on spaces and dashes", () => {
    assert.deepEqual(words("hello big-world"), ["hello", "big", "world"]);
  });
  it("splits camelCase", () => {
    assert.deepEqual(words("fooBarBaz"), ["foo", "bar", "baz"]);
  });
  it("keeps acronyms together", () => {
    assert.deepEqual(words("HTTPServer"), ["http", "server"]);
  });
});

describe("case conversion", () => {
  it("camelCase from words", () => {
    assert.equal(camelCase("hello big world"), "helloBigWorld");
  });
  it("kebabCase from camelCase", () => {
    assert.equal(kebabCase("fooBarBaz"), "foo-bar-baz");
  });
  it("snakeCase from kebab-case", () => {
    assert.equal(snakeCase("foo-bar"), "foo_bar");
  });
});
