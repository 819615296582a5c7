export interface TruncateOptions {
  /** Appended when the text is cut; counts toward `length`. */
  ellipsis?: string;
  /** Cut at the last space before the limit rather than inside a word. */
  wordBoundary?: boolean;
}

/** `text` cut to at most `length` characters, the ellipsis included. */
export function truncate(text: string, length: number, options: TruncateOptions = {}): string {
  const ellipsis = options.ellipsis ?? "…";
  if (length < 0) {
    throw new RangeError(`length must not be negative, got ${length}`);
  }
  if (text.length <= length) {
    return text;
  }
  if (ellipsis.length >= length) {
    return ellipsis.slice(0, length);
  }
  let cut = text.slice(0, length - ellipsis.length);
  if (options.wordBoundary) {
    const space = cut.lastIndexOf(" ");
    if (space > 0) {
      cut = cut.slice(0, space);
    }
  }
  return cut.trimEnd() + ellipsis;
}
