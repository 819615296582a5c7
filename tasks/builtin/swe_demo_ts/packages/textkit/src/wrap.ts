/** `text` broken into lines of at most `width` characters, at spaces; a word longer than `width` gets a line
 * of its own. Paragraphs (blank-line separated) stay apart. */
export function wrap(text: string, width: number): string[] {
  if (!Number.isInteger(width) || width < 1) {
    throw new RangeError(`width must be a positive integer, got ${width}`);
  }
  const lines: string[] = [];
  const paragraphs = text.split(/\n\s*\n/);
  paragraphs.forEach((paragraph, index) => {
    if (index > 0) {
      lines.push("");
    }
    let line = "";
    for (const word of paragraph.split(/\s+/).filter((w) => w.length > 0)) {
      if (line.length === 0) {
        line = word;
      } else if (line.length + 1 + word.length <= width) {
        line += " " + word;
      } else {
        lines.push(line);
        line = word;
      }
    }
    if (line.length > 0) {
      lines.push(line);
    }
  });
  return lines;
}
