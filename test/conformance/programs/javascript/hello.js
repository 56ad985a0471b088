console.log("Hello, World!");
