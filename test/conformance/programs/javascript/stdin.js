process.stdout.write(require("fs").readFileSync(0));
