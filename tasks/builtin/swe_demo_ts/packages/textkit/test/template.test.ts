import { test } from "node:test";
import assert from "node:assert/strict";
import { render, TemplateError } from "../src/template";

test("render replaces a placeholder", () => {
  assert.equal(render("Hello, {name}!", { name: "Ada" }), "Hello, Ada!");
});

test("render reads nested values", () => {
  assert.equal(render("{user.name} ({user.age})", { user: { name: "Ada", age: 36 } }), "Ada (36)");
});

test("render fails on a missing value", () => {
  assert.throws(() => render("{missing}", {}), TemplateError);
});

test("render uses the fallback for a missing value", () => {
  assert.equal(render("[{missing}]", {}, "?"), "[?]");
});
