import * as fs from "fs";
const s: string = fs.readFileSync("input.txt", "utf8");
fs.writeFileSync("output.txt", s.toUpperCase());
