const fs = require("fs");
fs.mkdirSync("out", { recursive: true });
fs.writeFileSync("out/result.txt", "result: ok");
console.log("written");
