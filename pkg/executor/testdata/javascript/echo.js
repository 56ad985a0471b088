const fs = require("fs");
process.stdout.write(fs.readFileSync(0));
