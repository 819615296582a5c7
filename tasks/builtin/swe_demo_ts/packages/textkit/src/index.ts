export { camelCase, kebabCase, snakeCase, words } from "./case";
export { truncate } from "./truncate";
export { wrap } from "./wrap";
export { render, TemplateError } from "./template";
export { plural, pluralize } from "./plural";
