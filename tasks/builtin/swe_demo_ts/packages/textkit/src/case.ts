/** Split `text` into lower-case words: at spaces, `-`, `_`, `.` and where a lower-case letter or digit meets
 * an upper-case one (`fooBar` -> `foo`, `bar`; `HTTPServer` -> `http`, `server`). */
export function words(text: string): string[] {
  return text
    .replace(/([a-z\d])([A-Z])/g, "$1 $2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1 $2")
    .split(/[\s\-_.]+/)
    .filter((word) => word.length > 0)
    .map((word) => word.toLowerCase());
}

export function camelCase(text: string): string {
  return words(text)
    .map((word, i) => (i === 0 ? word : word[0].toUpperCase() + word.slice(1)))
    .join("");
}

export function kebabCase(text: string): string {
  return words(text).join("-");
}

export function snakeCase(text: string): string {
  return words(text).join("_");
}
