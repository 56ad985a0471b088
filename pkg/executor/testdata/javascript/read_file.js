const fs = require("fs");
console.log(fs.readFileSync("data/input.txt", "utf8"));
