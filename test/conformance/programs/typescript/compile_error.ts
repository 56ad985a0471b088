const x: number = "not a number";
console.log(x);
