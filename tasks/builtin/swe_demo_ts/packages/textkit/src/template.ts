export class TemplateError extends Error {}

export type Values = Record<string, string | number | boolean>;

const PLACEHOLDER = /\{\{|\}\}|\{\s*([A-Za-z_][\w.]*)\s*\}/g;

/** `template` with each `{name}` replaced by `values[name]` (`{user.name}` reads nested objects); `{{` and
 * `}}` stand for literal braces. A name with no value is an error unless `fallback` is given. */
export function render(template: string, values: Record<string, unknown>, fallback?: string): string {
  return template.replace(PLACEHOLDER, (match: string, name: string | undefined) => {
    if (match === "{{") {
      return "{";
    }
    if (match === "}}") {
      return "}";
    }
    const value = lookup(values, name as string);
    if (value === undefined || value === null) {
      if (fallback !== undefined) {
        return fallback;
      }
      throw new TemplateError(`no value for {${name}}`);
    }
    return String(value);
  });
}

function lookup(values: Record<string, unknown>, path: string): unknown {
  let current: unknown = values;
  for (const key of path.split(".")) {
    if (typeof current !== "object" || current === null || !(key in current)) {
      return undefined;
    }
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}
