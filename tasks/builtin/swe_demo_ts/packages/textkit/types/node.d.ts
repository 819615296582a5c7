// The few declarations of Node's built-in modules the tests use: the project needs no @types/node.
declare module "node:test" {
  type Body = () => void | Promise<void>;
  export function test(name: string, body: Body): Promise<void>;
  export function describe(name: string, body: () => void): void;
  export function it(name: string, body: Body): void;
}

declare module "node:assert/strict" {
  interface Assert {
    (value: unknown, message?: string): asserts value;
    equal(actual: unknown, expected: unknown, message?: string): void;
    notEqual(actual: unknown, expected: unknown, message?: string): void;
    deepEqual(actual: unknown, expected: unknown, message?: string): void;
    ok(value: unknown, message?: string): asserts value;
    throws(block: () => unknown, error?: RegExp | Function | object, message?: string): void;
  }
  const assert: Assert;
  export default assert;
}
