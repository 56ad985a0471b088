const fs = require("fs");
fs.writeFileSync("output.txt", fs.readFileSync("input.txt", "utf8").toUpperCase());
