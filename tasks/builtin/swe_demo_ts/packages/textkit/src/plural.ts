const IRREGULAR: Record<string, string> = {
  child: "children",
  person: "people",
  man: "men",
  woman: "women",
  mouse: "mice",
  foot: "feet",
  tooth: "teeth",
};
const UNCHANGED = new Set(["sheep", "fish", "series", "species", "deer"]);

/** The plural of an English noun, keeping the case of its first letter. */
export function plural(noun: string): string {
  const lower = noun.toLowerCase();
  let result: string;
  if (UNCHANGED.has(lower)) {
    result = lower;
  } else if (lower in IRREGULAR) {
    result = IRREGULAR[lower];
  } else if (/(s|x|z|ch|sh)$/.test(lower)) {
    result = lower + "es";
  } else if (/[^aeiou]y$/.test(lower)) {
    result = lower.slice(0, -1) + "ies";
  } else {
    result = lower + "s";
  }
  return noun[0] === noun[0].toUpperCase() ? result[0].toUpperCase() + result.slice(1) : result;
}

/** `count` and the noun, plural unless `count` is 1: `pluralize(3, "box")` is "3 boxes". */
export function pluralize(count: number, noun: string): string {
  return `${count} ${count === 1 ? noun : plural(noun)}`;
}
