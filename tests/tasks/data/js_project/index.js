const ms = require("ms");

/** A duration such as "2h" or "90s" in whole seconds. */
exports.seconds = (text) => Math.round(ms(text) / 1000);
